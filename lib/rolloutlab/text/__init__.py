"""How numbers and log text are written for people: ``fmt`` (numbers, units, styled tables) and
``htmltext`` (escaping). Leaves every layer may use: import only config."""
