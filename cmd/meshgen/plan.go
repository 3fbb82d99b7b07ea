package main

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"github.com/meshgen/meshgen/internal/cli"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/status"
)

// planFlags are `meshgen plan`'s options.
type planFlags struct {
	repo, base, head, format string
	detailedExitCode         bool
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan --repo DIR [--base REF] [--head REF]",
		Short: "Show what a change to the mesh repository would do, for review",
		Long: `plan resolves and renders the mesh repository at two states, --base (the
state before a pull request) and --head (after it), and shows per node the
resources added, changed and removed, the containers that would be recreated
and the steps that would run again (and why), the secrets that would be made
or sealed to other nodes (names only), every requirement waiting for a
provider's answer, and every reason resolution refuses.

It needs no vault and no node: secrets are shown by name, never by value.
Providers' answers (a certificate authority's root) are read from the
status/<node> branches hostd pushed, when the repository has them; a
consumer of an answer not reported yet is shown waiting.

Without --head the directory is read as it is on disk (HEAD, for a bare
repository); without --base the plan starts from nothing. A base that does
not load or resolve is noted, and the plan starts from nothing.

Exit status: 0 when the head resolves, 1 when it is refused (or cannot be
read); with --detailed-exitcode, 2 when it resolves and changes something.`,
		Example: `  meshgen plan --repo . --base origin/main --head HEAD
  meshgen plan --repo examples/lab --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(cmd, f)
		},
	}
	cmd.Flags().StringVar(&f.repo, "repo", ".", "the mesh repository: a directory, a git work tree or a bare git repository")
	cmd.Flags().StringVar(&f.base, "base", "", "the git ref before the change (default: plan from nothing)")
	cmd.Flags().StringVar(&f.head, "head", "", "the git ref after the change (default: the directory as it is)")
	cmd.Flags().StringVar(&f.format, "format", "markdown", "output format: markdown or json")
	cmd.Flags().BoolVar(&f.detailedExitCode, "detailed-exitcode", false, "exit 2 when the plan resolves and changes something")
	return cmd
}

func runPlan(cmd *cobra.Command, f planFlags) error {
	if f.format != "markdown" && f.format != "json" {
		return fmt.Errorf("format %q is not markdown or json", f.format)
	}
	src := reconciler.PlanSource{Repo: f.repo, Base: f.base, Head: f.head}
	// A node's unreadable report must not stop a review: its answers are
	// missing (its consumers show as waiting), and the plan says why.
	var err error
	if src.Answers, err = reportedAnswers(f.repo); err != nil {
		src.Notes = append(src.Notes, err.Error())
	}
	plan, err := reconciler.PlanRepository(src)
	if err != nil {
		return err
	}
	out := plan.Markdown()
	if f.format == "json" {
		if out, err = plan.JSON(); err != nil {
			return err
		}
	}
	if _, err := cmd.OutOrStdout().Write(out); err != nil {
		return err
	}
	switch {
	case !plan.Resolves:
		return cli.ExitError{Code: 1}
	case f.detailedExitCode && plan.Changed():
		return cli.ExitError{Code: 2}
	}
	return nil
}

// reportedAnswers reads the providers' answers hostd reported on the
// status/<node> branches of the git repository at dir; none when dir is not
// a git repository.
func reportedAnswers(dir string) (reconciler.Answers, error) {
	nodes, err := status.Read(dir, status.ReadOptions{})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read providers' answers from the status branches: %w", err)
	}
	out := reconciler.Answers{}
	for _, n := range nodes {
		if n.Report != nil && len(n.Report.Answers) > 0 {
			out[n.Name] = n.Report.Answers
		}
	}
	return out, nil
}
