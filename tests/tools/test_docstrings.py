"""Docstrings in the three styles people write: the description and each parameter's text."""

from __future__ import annotations

from ra.tools.docstrings import parse_docstring


def test_google_style() -> None:
    doc = parse_docstring(
        """Search the index.

        Looks in every shard, newest first.

        Args:
            query (str): What to look for;
                a phrase in quotes matches exactly.
            limit: How many hits at most.
            *extra: Ignored.

        Returns:
            The hits.

        Raises:
            ValueError: never, really.
        """
    )
    assert doc.description == "Search the index.\n\nLooks in every shard, newest first."
    assert doc.params == {
        "query": "What to look for; a phrase in quotes matches exactly.",
        "limit": "How many hits at most.",
        "extra": "Ignored.",
    }


def test_numpy_style() -> None:
    doc = parse_docstring(
        """Scale a vector.

        Parameters
        ----------
        x, y : float
            The components,
            in metres.
        factor : int, optional
            How much.
        verbose

        Returns
        -------
        tuple
            The scaled vector.
        """
    )
    assert doc.description == "Scale a vector."
    assert doc.params == {
        "x": "The components, in metres.",
        "y": "The components, in metres.",
        "factor": "How much.",
        "verbose": "",
    }


def test_sphinx_style() -> None:
    doc = parse_docstring(
        """Fetch a page.

        :param url: The address,
            with the scheme.
        :param int timeout: Seconds to wait.
        :type timeout: int
        :returns: The body.
        :raises OSError: on network trouble.
        """
    )
    assert doc.description == "Fetch a page."
    assert doc.params == {"url": "The address, with the scheme.", "timeout": "Seconds to wait."}


def test_attributes_section_and_no_sections() -> None:
    assert parse_docstring("Just prose.\n\nTwo paragraphs.").description == "Just prose.\n\nTwo paragraphs."
    doc = parse_docstring("A point.\n\nAttributes:\n    x: across\n    y: up\n")
    assert doc.description == "A point."
    assert doc.params == {"x": "across", "y": "up"}
    assert parse_docstring(None).description == ""
    assert parse_docstring("   ").params == {}


def test_a_colon_in_prose_is_not_a_section() -> None:
    doc = parse_docstring("Note: this is prose.\nIt goes on.\n\nArgs:\n    a: first\n")
    assert doc.description == "Note: this is prose.\nIt goes on."
    assert doc.params == {"a": "first"}
