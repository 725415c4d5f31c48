"""tools/extract_consumer_facts.py's readers, one concern a module."""
