"""`python -m envgen` and the `envgen` script: the command line, interruptible from its first
instant."""


def run() -> None:
    from envgen import interrupts

    interrupts.until_ready()
    from envgen.cli import main

    main()


if __name__ == "__main__":
    run()
