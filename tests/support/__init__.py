"""What the tests share and are not tests themselves: fakes of the programs and services ours talk to, worlds built
on them, models of consumers, and the stacks tests build from. A test file imports its helpers from here only, never
from another test file (tests/test_layers.py); tests/README.md lists each module."""
