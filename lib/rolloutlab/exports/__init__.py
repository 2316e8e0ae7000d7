"""Files written for other tools: the training files of each trainer (``training_files``).
May import analysis, store, capture's redaction, text and config; never views or cli."""
