package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/internal/cli"
)

// checkFlags are `meshgen check`'s options.
type checkFlags struct {
	repo, ref, format string
}

func newCheckCmd() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check --repo DIR [--ref REF] [--format text|json]",
		Short: "Check a mesh repository and list every problem at once",
		Long: `check reads the mesh repository (mesh.yaml, nodes/, catalog/contracts/,
catalog/modules/ and assignments/) and refuses everything the formats do
not allow, all at once: each problem as file:line:col: message, followed by
a hint on what would fix it.

With --ref it reads that branch, full ref or commit of the git repository at
--repo (bare or not) without a checkout; without it, the directory as it is.

It checks each file and how they refer to each other; whether every
requirement finds a provider is resolution's question (meshgen plan).

Exit status: 0 when the repository is clean, 1 when it has problems or
cannot be read.`,
		Example: `  meshgen check --repo examples/lab
  meshgen check --repo /srv/git/mesh.git --ref main --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	cmd.Flags().StringVar(&f.repo, "repo", ".", "the mesh repository: a directory, or a git repository with --ref")
	cmd.Flags().StringVar(&f.ref, "ref", "", "read this git branch, ref or commit instead of the directory")
	cmd.Flags().StringVar(&f.format, "format", "text", "output format: text or json")
	return cmd
}

// checkReport is `check --format json`'s output.
type checkReport struct {
	OK       bool           `json:"ok"`
	Repo     string         `json:"repo"`
	Source   string         `json:"source,omitempty"`
	Summary  string         `json:"summary"`
	Problems []checkProblem `json:"problems"`
}

// checkProblem is one problem in JSON.
type checkProblem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Field   string `json:"field"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
}

func runCheck(stdout, stderr io.Writer, f checkFlags) error {
	if f.format != "text" && f.format != "json" {
		return fmt.Errorf("format %q is not text or json", f.format)
	}
	var repo *schema.Repo
	var err error
	if f.ref != "" {
		repo, err = schema.LoadRef(f.repo, f.ref)
	} else {
		repo, err = schema.LoadDir(f.repo)
	}
	var probs schema.Problems
	if err != nil && !errors.As(err, &probs) {
		return err
	}
	rep := checkReport{OK: err == nil, Repo: f.repo, Problems: []checkProblem{}}
	if repo != nil {
		rep.Source = repo.Source
		rep.Summary = summary(repo)
	} else {
		rep.Summary = plural(len(probs), "problem")
	}
	for _, p := range probs {
		rep.Problems = append(rep.Problems, checkProblem{
			File: p.Pos.File, Line: p.Pos.Line, Col: p.Pos.Col,
			Field: p.Field, Message: p.Message, Hint: p.Hint,
		})
	}
	if f.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if rep.OK {
		fmt.Fprintln(stdout, rep.Summary)
	} else {
		for _, p := range probs {
			fmt.Fprintln(stderr, p.String())
			if p.Hint != "" {
				fmt.Fprintf(stderr, "\thint: %s\n", p.Hint)
			}
		}
		fmt.Fprintf(stderr, "%s: %s\n", f.repo, rep.Summary)
	}
	if !rep.OK {
		return cli.ExitError{Code: 1}
	}
	return nil
}

// summary says in one line what a clean repository holds.
func summary(r *schema.Repo) string {
	s := fmt.Sprintf("mesh %q is clean: %s, %s, %s, %s", r.Mesh.Name,
		plural(len(r.Nodes), "node"), plural(len(r.Contracts), "contract"),
		plural(len(r.Modules), "module"), plural(len(r.Assignments), "assignment"))
	if r.Source != "" {
		s += " at " + r.Source[:min(12, len(r.Source))]
	}
	return s
}

// plural writes a count and a noun.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
