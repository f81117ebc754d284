package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// command is one subcommand's flag set: stdlib flags, each optionally
// also read from an environment variable. A value on the command line wins
// over the environment.
type command struct {
	c     *cli
	name  string
	usage string // "NAME -- COMMAND [ARG...]"
	about string // what the command does, and anything else -h shows
	fs    *flag.FlagSet
	env   map[string]string // flag name → environment variable
}

func (c *cli) command(name, usage, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself
	return &command{c: c, name: name, usage: usage, about: about, fs: fs, env: map[string]string{}}
}

// fromEnv makes the flag name also settable by the environment variable env.
func (cmd *command) fromEnv(name, env string) { cmd.env[name] = env }

// parse applies the environment, then args. Flags may come before and
// between the positional arguments; everything after a "--" is returned
// apart, in tail, and sawDashes says whether there was one. A request for
// help prints the usage to stdout and returns flag.ErrHelp; other errors
// are usage errors.
func (cmd *command) parse(args []string) (pos, tail []string, sawDashes bool, err error) {
	for name, env := range cmd.env {
		v := cmd.c.getenv(env)
		if v == "" {
			continue
		}
		if err := cmd.fs.Set(name, v); err != nil {
			return nil, nil, false, usageErrorf("%s=%q: %v", env, v, err)
		}
	}
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail, sawDashes = args[:i], args[i+1:], true
	}
	for {
		if err := cmd.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				cmd.printUsage(cmd.c.stdout)
				return nil, nil, false, err
			}
			return nil, nil, false, usageErrorf("%v", err)
		}
		args = cmd.fs.Args()
		if len(args) == 0 {
			return pos, tail, sawDashes, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// exit turns a parse error into the exit status: 0 after -h, else a
// usage error with a hint.
func (cmd *command) exit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(cmd.c.stderr, "fencelock %s: %v\nRun 'fencelock %s -h' for usage.\n", cmd.name, err, cmd.name)
	return exitUsage
}

func (cmd *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: fencelock %s %s\n\n%s\n", cmd.name, cmd.usage, strings.TrimSpace(cmd.about))
	var flags []string
	cmd.fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	if len(flags) > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
	}
	cmd.fs.VisitAll(func(f *flag.Flag) {
		typ, help := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if typ != "" {
			head += " " + typ
		}
		fmt.Fprintf(w, "%s\n      %s", head, help)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		if env := cmd.env[f.Name]; env != "" {
			fmt.Fprintf(w, " [$%s]", env)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\n%s", exitCodesHelp)
}

// durationIn checks a duration flag's bounds.
func durationIn(flagName string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usageErrorf("--%s %v not in [%v, %v]", flagName, d, lo, hi)
	}
	return nil
}
