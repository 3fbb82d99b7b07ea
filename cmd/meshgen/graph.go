package main

import (
	"fmt"

	"github.com/spf13/cobra"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/graph"
	"github.com/meshgen/meshgen/reconciler/status"
)

// graphFlags are `meshgen graph`'s options.
type graphFlags struct {
	repo, ref, format string
}

func newGraphCmd() *cobra.Command {
	var f graphFlags
	cmd := &cobra.Command{
		Use:   "graph --repo DIR [--ref REF] [--format mermaid|dot]",
		Short: "Draw which assignment provides what to whom, seats and nodes",
		Long: `graph resolves the mesh repository and draws it: one box per node holding
its assignments and the seats they hold, and an arrow from each consumer to
the assignment that answers its requirement, labelled with the requirement
and its contract. An arrow is dashed while the provider's answer (a field
only the running provider knows) has not been reported yet.

Mermaid (the default) renders in a pull request; dot is for Graphviz.

Without --ref the directory is read as it is on disk. With --ref the
repository is read at that ref, and providers' answers reported on the
status/<node> branches are taken into account.`,
		Example: "  meshgen graph --repo examples/lab\n  meshgen graph --repo /srv/mesh.git --ref main --format dot | dot -Tsvg > mesh.svg",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGraph(cmd, f)
		},
	}
	cmd.Flags().StringVar(&f.repo, "repo", ".", "the mesh repository")
	cmd.Flags().StringVar(&f.ref, "ref", "", "a git ref to read instead of the directory (and use status/<node> answers)")
	cmd.Flags().StringVar(&f.format, "format", "mermaid", "output format: mermaid or dot")
	return cmd
}

func runGraph(cmd *cobra.Command, f graphFlags) error {
	if f.format != "mermaid" && f.format != "dot" {
		return fmt.Errorf("format %q is not mermaid or dot", f.format)
	}
	var repo *schema.Repo
	var err error
	var opts reconciler.ResolveOptions
	if f.ref != "" {
		repo, err = schema.LoadRef(f.repo, f.ref)
		if err == nil {
			nodes, serr := status.Read(f.repo, status.ReadOptions{})
			if serr != nil {
				return serr
			}
			opts.Answers = reconciler.Answers{}
			for _, n := range nodes {
				if n.Report != nil && len(n.Report.Answers) > 0 {
					opts.Answers[n.Name] = n.Report.Answers
				}
			}
		}
	} else {
		repo, err = schema.LoadDir(f.repo)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", f.repo, err)
	}
	res, err := reconciler.Resolve(repo, opts)
	if err != nil {
		return err
	}
	g := graph.Build(res)
	out := g.Mermaid()
	if f.format == "dot" {
		out = g.DOT()
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}
