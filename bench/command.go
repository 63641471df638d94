package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit statuses of the hetbench commands.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed (I/O, an internal error)
	ExitUsage = 2 // bad flags or bad input
)

// ParseFlags parses a subcommand's flags. It returns false, with the exit
// status, when the command should stop: after -h (ExitOK), a bad flag or,
// unless positional arguments are allowed, an unexpected argument
// (ExitUsage).
func ParseFlags(fs *flag.FlagSet, name string, args []string, positional bool, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	if !positional && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hetbench %s: unexpected argument %q\n", name, fs.Arg(0))
		return ExitUsage, false
	}
	return ExitOK, true
}
