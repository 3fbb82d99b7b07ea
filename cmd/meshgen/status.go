package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/internal/cli"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/loop"
	"github.com/meshgen/meshgen/reconciler/status"
)

// statusFlags are `meshgen status`'s options.
type statusFlags struct {
	repo, format, cacheDir string
	vault                  vaultFlags
	staleAfter             int
	interval               time.Duration
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status --repo DIR [--format json] [--stale-after N]",
		Short: "Show which generation every node applied, and what failed",
		Long: `status reads the status/<node> branches hostd pushes after each apply and
the node/<node> branches the reconciler writes, and shows per node the
generation applied against the latest, when it last reported, the resources
that failed and those gated behind them, and the nodes that have not
reported within --stale-after poll intervals (mesh.yaml's pollInterval
unless --interval is given). A node removed from the mesh is listed as
removed, with whether its hostd applied the empty declaration that removes
its containers.

It lists what waits, as the last reconcile recorded it on meshgen/state:
consumers waiting for a provider's answer not reported yet, and those
waiting for an operator's secret not delivered to vaultd yet, with the
command that delivers it (meshgen vault put NAME). No vault is needed for
this. Before any reconcile recorded them, the waits for providers' answers
are found by resolving main. Given vaultd (--vault or $MESHGEN_VAULT), it
also lists each rotation in progress and the nodes it waits on.

Exit status: 0 when every node is current, catching up or removed, 1 when
any node failed, was refused or is stale. Waiting is a state, not a
failure: a waiting consumer never makes the exit status non-zero.`,
		Example: `  meshgen status --repo /srv/mesh.git
  meshgen status --repo https://git.example/mesh.git
  meshgen status --repo /srv/mesh.git --format json --stale-after 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd, f)
		},
	}
	cmd.Flags().StringVar(&f.repo, "repo", ".", "the mesh repository: a directory (bare or a work tree) or a git URL")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", "", "where a remote repository is cached (default: the user cache directory)")
	cmd.Flags().StringVar(&f.format, "format", "text", "output format: text or json")
	f.vault.register(cmd.Flags())
	cmd.Flags().IntVar(&f.staleAfter, "stale-after", 3, "poll intervals without a report after which a node is stale (0: never)")
	cmd.Flags().DurationVar(&f.interval, "interval", 0, "hostd's poll interval (default: mesh.yaml's pollInterval, else 1m)")
	return cmd
}

func runStatus(cmd *cobra.Command, f statusFlags) error {
	if f.format != "text" && f.format != "json" {
		return fmt.Errorf("format %q is not text or json", f.format)
	}
	dir := f.repo
	if loop.IsRemote(f.repo) {
		if f.cacheDir == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				return fmt.Errorf("no cache directory for %s: give --cache-dir", f.repo)
			}
			f.cacheDir = filepath.Join(base, "meshgen", "status-"+safeName(f.repo))
		}
		rem, err := branch.OpenRemote(f.repo, branch.RemoteOptions{CacheDir: f.cacheDir})
		if err != nil {
			return err
		}
		defer rem.Close()
		if err := rem.Fetch(cmd.Context(), branch.NodeRefs+"*", branch.StatusRefs+"*", "refs/heads/meshgen/*"); err != nil {
			return err
		}
		// main only gives the poll interval: a repository without it (or
		// an unreachable one) falls back to the default.
		_ = rem.Fetch(cmd.Context(), branch.MainRef)
		dir = rem.CacheDir()
	}
	nodes, err := status.Read(dir, status.ReadOptions{})
	if err != nil {
		return err
	}
	// main gives the poll interval and who waits for a provider's answer;
	// a main that does not load or resolve leaves both out.
	repo, mainErr := schema.LoadRef(dir, branch.MainRef)
	if f.interval == 0 {
		f.interval = time.Minute
		if mainErr == nil && repo.Mesh.Defaults.PollInterval != "" {
			if d, err := time.ParseDuration(repo.Mesh.Defaults.PollInterval); err == nil {
				f.interval = d
			}
		}
	}
	now := time.Now()
	sum := status.Summarize(nodes, status.SummaryOptions{Now: now, Interval: f.interval, StaleAfter: f.staleAfter})
	waits, err := status.ReadWaits(dir)
	if err != nil {
		return err
	}
	switch {
	case waits != nil:
		// What the reconciler found waiting, operators' secrets included.
		sum.Waiting, sum.WaitingSource = waits.Waiting, waits.Source
		if mainErr == nil && repo.Source != "" && repo.Source != waits.Source {
			sum.Notes = append(sum.Notes, fmt.Sprintf("waits as of main %s, the last commit reconciled; main is at %s now (not reconciled yet, or refused: see the reconciler's log)",
				short(waits.Source), short(repo.Source)))
		}
	case mainErr == nil:
		ans := reconciler.Answers{}
		for _, n := range nodes {
			if n.Report != nil && len(n.Report.Answers) > 0 {
				ans[n.Name] = n.Report.Answers
			}
		}
		if res, err := reconciler.Resolve(repo, reconciler.ResolveOptions{Answers: ans}); err == nil {
			for _, w := range res.Waiting {
				sum.Waiting = append(sum.Waiting, status.Waiting(w))
			}
		}
	}
	if f.vault.socket != "" {
		if sum.Rotations, err = rotations(cmd, f.vault, repo); err != nil {
			return err
		}
	}
	if f.format == "json" {
		err = sum.WriteJSON(cmd.OutOrStdout())
	} else {
		err = sum.WriteText(cmd.OutOrStdout(), now)
	}
	if err != nil {
		return err
	}
	if !sum.OK() {
		return cli.ExitError{Code: 1}
	}
	return nil
}

// rotations lists vaultd's rotations in progress, naming the nodes they wait
// on by the recipients in nodes/<n>.yaml of main (repo may be nil).
func rotations(cmd *cobra.Command, vf vaultFlags, repo *schema.Repo) ([]status.Rotation, error) {
	c, err := vf.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st, err := c.Status(cmd.Context())
	if err != nil {
		return nil, fmt.Errorf("vault status: %w", err)
	}
	nodeOf := map[string]string{}
	if repo != nil {
		for name, n := range repo.Nodes {
			nodeOf[n.Recipient] = name
		}
	}
	var out []status.Rotation
	for _, s := range st.Secrets {
		ro := s.Rotation
		if ro == nil {
			continue
		}
		r := status.Rotation{Secret: s.Name, Phase: string(ro.Phase), From: ro.From, To: ro.To}
		for _, p := range ro.WaitsOn {
			who := p.Recipient
			if n, ok := nodeOf[p.Recipient]; ok {
				who = n
			}
			r.WaitsOn = append(r.WaitsOn, fmt.Sprintf("%s (%s)", who, p.Role))
		}
		out = append(out, r)
	}
	return out, nil
}
