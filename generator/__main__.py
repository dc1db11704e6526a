"""`python -m generator` runs the envgen command line."""

from generator.cli import main

if __name__ == "__main__":
    main()
