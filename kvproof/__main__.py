import sys

from .cli import main


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
