package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock"
)

// command is one subcommand's flag set: stdlib flags, each optionally
// also read from environment variables. A value on the command line wins
// over the environment.
type command struct {
	c     *cli
	name  string
	usage string // "NAME -- COMMAND [ARG...]"
	about string // what the command does, and anything else -h shows
	exits string // the exit statuses this command can return, for -h
	fs    *flag.FlagSet
	env   map[string][]string // flag name → environment variables, first set wins
	alias map[string]string   // short flag name → the long one it stands for
	from  map[string]string   // flag name → where its value came from, for messages
	bad   error               // the last value a flag refused, worded for people
}

func (c *cli) command(name, usage, about, exits string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself
	return &command{c: c, name: name, usage: usage, about: about, exits: exits, fs: fs,
		env: map[string][]string{}, alias: map[string]string{}, from: map[string]string{}}
}

// fromEnv makes the flag name also settable by the environment variables
// envs; the first one that is set wins.
func (cmd *command) fromEnv(name string, envs ...string) { cmd.env[name] = envs }

// duration registers a duration flag whose errors say what a duration
// looks like.
func (cmd *command) duration(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	cmd.fs.Var(&durationValue{cmd: cmd, name: name, d: p}, name, usage)
}

// aliasFlag registers short as another name of the flag long.
func (cmd *command) aliasFlag(short, long string) {
	cmd.fs.Var(cmd.fs.Lookup(long).Value, short, "")
	cmd.alias[short] = long
}

// parse applies args, then the environment to flags that args left
// unset. Flags may come before and between the positional arguments;
// everything after a "--" is returned apart, in tail, and sawDashes says
// whether there was one. A request for help prints the usage to stdout
// and returns flag.ErrHelp; other errors are usage errors.
func (cmd *command) parse(args []string) (pos, tail []string, sawDashes bool, err error) {
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail, sawDashes = args[:i], args[i+1:], true
	}
	for {
		if err := cmd.parseFlags(args); err != nil {
			return nil, nil, false, err
		}
		args = cmd.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if err := cmd.applyEnv(); err != nil {
		return nil, nil, false, err
	}
	return pos, tail, sawDashes, nil
}

// parseCommand parses the arguments of run and elect, flags, NAME and
// COMMAND, the way flock(1) and "etcdctl lock" do: flags come before
// NAME, and everything after NAME is COMMAND, a "--" or a "-x" of its own
// included. "NAME -- COMMAND" is accepted too, and so are flags between
// NAME and "--" when the first word after NAME is a flag: COMMAND does
// not start with "-" unless it comes after "--".
func (cmd *command) parseCommand(args []string) (name string, argv []string, err error) {
	if err := cmd.parseFlags(args); err != nil {
		return "", nil, err
	}
	rest := cmd.fs.Args()
	if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" && (len(consumed) == 1 || !cmd.takesValue(consumed[len(consumed)-2])) {
		return "", nil, usageErrorf("missing lock NAME before --")
	}
	if len(rest) == 0 {
		return "", nil, usageErrorf("missing lock NAME")
	}
	name, rest = rest[0], rest[1:]
	switch {
	case len(rest) > 0 && rest[0] == "--":
		argv = rest[1:]
	case len(rest) > 0 && strings.HasPrefix(rest[0], "-"):
		i := slices.Index(rest, "--")
		if i < 0 && slices.Contains([]string{"-h", "-help", "--help"}, rest[0]) {
			return "", nil, cmd.parseFlags(rest[:1]) // "run NAME -h" asks for help
		}
		if i < 0 {
			return "", nil, usageErrorf("%q after NAME: flags go before NAME; a COMMAND that starts with - goes after --", rest[0])
		}
		if err := cmd.parseFlags(rest[:i]); err != nil {
			return "", nil, err
		}
		if left := cmd.fs.Args(); len(left) > 0 {
			return "", nil, usageErrorf("unexpected argument %q after NAME: put COMMAND after --, or flags before NAME", left[0])
		}
		argv = rest[i+1:]
	default:
		argv = rest
	}
	if len(argv) == 0 {
		return "", nil, usageErrorf("missing COMMAND after NAME")
	}
	if err := cmd.applyEnv(); err != nil {
		return "", nil, err
	}
	return name, argv, validName(name)
}

// takesValue reports whether arg is a flag that takes the next argument
// as its value ("--ttl", not "--ttl=5s" or a bool flag).
func (cmd *command) takesValue(arg string) bool {
	n := strings.TrimLeft(arg, "-")
	if n == arg || strings.Contains(n, "=") {
		return false
	}
	f := cmd.fs.Lookup(n)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// parseFlags parses flags from args up to the first other argument; a
// request for help prints the usage to stdout and returns flag.ErrHelp,
// other errors are usage errors.
func (cmd *command) parseFlags(args []string) error {
	err := cmd.fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		cmd.printUsage(cmd.c.stdout)
		return err
	case cmd.bad != nil:
		return usageError{cmd.bad}
	}
	return usageErrorf("%v", err)
}

// applyEnv records where each flag given came from, then sets the flags
// that args left unset from the environment.
func (cmd *command) applyEnv() error {
	cmd.fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if long, ok := cmd.alias[name]; ok {
			name = long
		}
		cmd.from[name] = "--" + name
	})
	for name, envs := range cmd.env {
		if _, set := cmd.from[name]; set {
			continue
		}
		for _, env := range envs {
			v := cmd.c.getenv(env)
			if v == "" {
				continue
			}
			if err := cmd.fs.Set(name, v); err != nil {
				return usageErrorf("%s=%s: %v", env, v, err)
			}
			cmd.from[name] = env
			break
		}
	}
	return nil
}

// set reports whether the flag name was given, on the command line or in
// the environment.
func (cmd *command) set(name string) bool { _, ok := cmd.from[name]; return ok }

// source names where a flag's value came from, for messages: "--ttl 0s"
// or "FENCELOCK_TTL=0s", or "--ttl 10s (the default)".
func (cmd *command) source(name string) string {
	f := cmd.fs.Lookup(name)
	switch from := cmd.from[name]; {
	case from == "":
		return "--" + name + " " + f.Value.String() + " (the default)"
	case strings.HasPrefix(from, "--"):
		return from + " " + f.Value.String()
	case strings.Contains(from, " "):
		return from + " (" + f.Value.String() + ")"
	default:
		return from + "=" + f.Value.String()
	}
}

// exit turns a parse error into the exit status: 0 after -h, else a
// usage error with a hint.
func (cmd *command) exit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(cmd.c.stderr, "fencelock %s: %s (run 'fencelock %s -h' for usage)\n", cmd.name, message(err), cmd.name)
	return exitUsage
}

func (cmd *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: fencelock %s\n\n%s\n", strings.TrimSpace(cmd.name+" "+cmd.usage), strings.TrimSpace(cmd.about))
	shorts := map[string]string{} // long → short
	for s, l := range cmd.alias {
		shorts[l] = s
	}
	first := true
	cmd.fs.VisitAll(func(f *flag.Flag) {
		if _, isAlias := cmd.alias[f.Name]; isAlias {
			return
		}
		if first {
			fmt.Fprintf(w, "\nFlags:\n")
			first = false
		}
		typ, help := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if s, ok := shorts[f.Name]; ok {
			head = "  -" + s + ", --" + f.Name
		}
		if typ != "" && typ != "value" {
			head += " " + typ
		}
		fmt.Fprintf(w, "%s\n      %s", head, help)
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && !strings.Contains(help, "(default") {
			fmt.Fprintf(w, " (default %s)", d)
		}
		if envs := cmd.env[f.Name]; len(envs) > 0 {
			fmt.Fprintf(w, " [$%s]", strings.Join(envs, ", $"))
		}
		fmt.Fprintln(w)
	})
	if cmd.exits != "" {
		fmt.Fprintf(w, "\nExit status:\n%s", cmd.exits)
	}
}

// durationValue is a time.Duration flag whose parse errors say what a
// duration looks like; a bare number most likely lacks its unit.
type durationValue struct {
	cmd  *command
	name string
	d    *time.Duration
}

func (v *durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			err = fmt.Errorf("a duration needs a unit, e.g. %ss or %sms", s, s)
		} else {
			err = errors.New("not a duration: write e.g. 10s, 500ms or 2m")
		}
		v.cmd.bad = fmt.Errorf("--%s %s: %w", v.name, s, err)
		return err
	}
	*v.d = d
	return nil
}

// addPermits registers --permits, and FENCELOCK_PERMITS, on cmd: a
// semaphore's permits; *n stays 0 (a lock) unless it is given.
func (cmd *command) addPermits(n *int, usage string) {
	cmd.fs.Var(&permitsValue{cmd: cmd, n: n}, "permits", usage)
	cmd.fromEnv("permits", "FENCELOCK_PERMITS")
}

// permitsValue is --permits: 1 to fencelock.MaxPermits, checked as it is
// parsed, so that a bad value is a usage error before anything is sent.
type permitsValue struct {
	cmd *command
	n   *int
}

func (v *permitsValue) String() string {
	if v.n == nil || *v.n == 0 {
		return ""
	}
	return strconv.Itoa(*v.n)
}

func (v *permitsValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		err = fmt.Errorf("not a number: want 1 to %d permits", fencelock.MaxPermits)
	case n == 0:
		// A lock is no semaphore of 0 permits: say how to ask for it.
		err = fmt.Errorf("want 1 to %d permits; for the lock NAME give none (an empty FENCELOCK_PERMITS= undoes an exported one)", fencelock.MaxPermits)
	case n < 1 || n > fencelock.MaxPermits:
		err = fmt.Errorf("want 1 to %d permits", fencelock.MaxPermits)
	}
	if err != nil {
		v.cmd.bad = fmt.Errorf("--permits %s: %w", s, err)
		return err
	}
	*v.n = n
	return nil
}

// durationIn checks a duration flag's bounds.
func (cmd *command) durationIn(name string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usageErrorf("%s: want a duration from %s to %s, e.g. 30s", cmd.source(name), shortDuration(lo), shortDuration(hi))
	}
	return nil
}

// shortDuration prints d without zero minutes and seconds: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
