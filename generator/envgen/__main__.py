"""`python -m envgen` runs the envgen command line."""

from envgen.cli import main

if __name__ == "__main__":
    main()
