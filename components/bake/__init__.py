"""Node images: what each one bakes (content.py) and the bundle Image Builder runs (bundle.py)."""
