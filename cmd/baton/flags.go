package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Every command parses its flags with parseFlags: an invalid value, whether
// given as a flag or through the environment variable behind it, stops the
// command with an error naming the flag or the variable and what it
// accepts, and a word that is not a flag is an error rather than the silent
// end of the flags.

// envFlag ties a flag to the environment variable that gives its value when
// the command line does not.
type envFlag struct {
	flag string
	env  string
}

// parseFlags parses args into fs, then gives each flag of envs that the
// command line left out the value of its environment variable, parsed by
// the flag itself. Arguments that are not flags are an error.
func parseFlags(fs *flag.FlagSet, args []string, envs ...envFlag) error {
	if err := parseQuietly(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags are --name value or --name=value)", fs.Arg(0))
	}
	return applyEnv(fs, envs)
}

// parseQuietly is fs.Parse printing the command's help (printHelp) to
// stdout for -h only: a bad flag is reported once, by the error it returns.
func parseQuietly(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(nil)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(os.Stdout, fs)
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (-h lists the flags)", err)
	}
	return nil
}

// applyEnv sets each flag of envs that was not given on the command line
// from its environment variable, when that is set.
func applyEnv(fs *flag.FlagSet, envs []envFlag) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, e := range envs {
		v, ok := os.LookupEnv(e.env)
		if !ok || v == "" || given[e.flag] {
			continue
		}
		if err := fs.Set(e.flag, v); err != nil {
			return fmt.Errorf("%s=%q: %w", e.env, v, err)
		}
	}
	return nil
}

// choiceFlag is a string flag that takes one of a fixed set of values,
// compared without case.
type choiceFlag struct {
	value   string
	choices []string
}

func newChoice(def string, choices ...string) *choiceFlag {
	return &choiceFlag{value: def, choices: choices}
}

func (c *choiceFlag) String() string {
	if c == nil {
		return ""
	}
	return c.value
}

func (c *choiceFlag) Set(s string) error {
	v := strings.ToLower(strings.TrimSpace(s))
	if !slices.Contains(c.choices, v) {
		return fmt.Errorf("must be one of %s", strings.Join(c.choices, ", "))
	}
	c.value = v
	return nil
}

// positiveDuration is a duration flag whose value, when given, must be over
// zero; zero means "not given".
type positiveDuration struct{ d time.Duration }

func (p *positiveDuration) String() string {
	if p == nil || p.d == 0 {
		return ""
	}
	return p.d.String()
}

func (p *positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return errors.New("must be a duration such as 90s, 10m or 1h")
	}
	if d <= 0 {
		return errors.New("must be a positive duration such as 10m")
	}
	p.d = d
	return nil
}
