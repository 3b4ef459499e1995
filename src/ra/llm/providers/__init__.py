"""Native provider adapters. Each module is imported only when its adapter is first used."""
