"""`duckscore` (the console script) and `python -m duckscore`: interrupts are handled before the
command line is imported, so Ctrl-C during start-up is the same one line as later."""

import sys

from .core.interrupts import catch_sigterm, interrupt_message


def main() -> None:
    catch_sigterm()
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        message, status = interrupt_message()
        sys.stderr.write(f"duckscore: error: {message}\n")
        sys.exit(status)
    cli_main()


if __name__ == "__main__":
    main()
