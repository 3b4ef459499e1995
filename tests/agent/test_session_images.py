"""submit(text, images=...): the images join that input's user message, and only that one."""

from __future__ import annotations

from ra.llm.testing import reply
from ra.llm.types import ContentKind, ImageData, Role

from .support import make_session


async def test_images_join_the_submitted_text_only() -> None:
    session, model = make_session([reply("a cat"), reply("ok")])
    image = ImageData(data=b"\x89PNG fake", media_type="image/png")
    result = await session.submit("what is this?", images=[image])
    assert result.text == "a cat"
    (user,) = [m for m in model.requests[0].messages if m.role is Role.USER]
    assert [p.kind for p in user.content] == [ContentKind.TEXT, ContentKind.IMAGE]
    assert user.content[0].text == "what is this?" and user.content[1].image is image
    await session.submit("and now?")
    users = [m for m in model.requests[1].messages if m.role is Role.USER]
    assert [len(m.content) for m in users] == [2, 1]  # the image stays with its own input
