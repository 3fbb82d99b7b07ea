package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// State is a node's standing in a [Summary].
type State string

// The states of a node.
const (
	// Current: the node applied the latest generation and nothing failed.
	Current State = "current"
	// Behind: the node has not applied the latest generation yet, and its
	// last apply did not fail.
	Behind State = "behind"
	// Failed: the last apply failed (a resource failed, later ones gated).
	Failed State = "failed"
	// Refused: hostd refused the declaration (signature, replay, node).
	Refused State = "refused"
	// Stale: no report within the allowed number of poll intervals.
	Stale State = "stale"
	// Never: the node has a branch but hostd never reported.
	Never State = "never"
	// Removed: the node was removed from the mesh; its branch holds a final
	// declaration with no resources, which its hostd applies to remove the
	// containers it ran. Neither a failure nor stale: a node that is gone
	// reports no more.
	Removed State = "removed"
)

// SummaryOptions say what "stale" means.
type SummaryOptions struct {
	// Now is the time to judge staleness against.
	Now time.Time
	// Interval is hostd's poll interval (mesh.yaml defaults.pollInterval).
	Interval time.Duration
	// StaleAfter is how many intervals without a report make a node stale.
	StaleAfter int
}

// Entry is one node's line of a [Summary].
type Entry struct {
	Node      string    `json:"node"`
	State     State     `json:"state"`
	Applied   uint64    `json:"applied"`
	Attempted uint64    `json:"attempted,omitempty"`
	Latest    uint64    `json:"latest"`
	When      time.Time `json:"when,omitzero"`
	// Refused is hostd's reason for refusing the declaration.
	Refused string `json:"refused,omitempty"`
	// Failures are the resources that failed, with why.
	Failures []declaration.Result `json:"failures,omitempty"`
	// Gated are the resources not reached because of a failure.
	Gated []string `json:"gated,omitempty"`
	// LeftFiles are secret files no longer declared that the node still
	// holds (a retired credential, say), with why hostd left them.
	LeftFiles []declaration.LeftFile `json:"leftFiles,omitempty"`
}

// Waiting is a consumer's requirement waiting for its provider's answer
// (reconciler.Waiting; this package does not import the resolver, which
// reads reports through it).
type Waiting struct {
	Assignment  string   `json:"assignment"`
	Requirement string   `json:"requirement"`
	Provider    string   `json:"provider"`
	Answer      string   `json:"answer"`
	Fields      []string `json:"fields"`
	// Hint is what an operator must do to end the wait (reconciler.Waiting.Hint).
	Hint string `json:"hint,omitempty"`
}

// Rotation is a secret's rotation in progress and the nodes it waits on
// (design 27: status shows who a rotation waits on).
type Rotation struct {
	Secret string `json:"secret"`
	Phase  string `json:"phase"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	// WaitsOn lists "<node> (<role>)", or the recipient when no node of
	// the mesh has it.
	WaitsOn []string `json:"waitsOn"`
}

// Summary is every node's standing.
type Summary struct {
	Nodes []Entry `json:"nodes"`
	// Waiting lists the requirements waiting for a provider's answer or
	// for an operator's secret not delivered to vaultd yet (a state, not a
	// failure: nothing depending on them is delivered yet). The caller
	// fills it from the reconciler's record ([ReadWaits]) or, without one,
	// from a resolution of main.
	Waiting []Waiting `json:"waiting,omitempty"`
	// WaitingSource is the commit of main the reconciler recorded Waiting
	// for; empty when Waiting comes from a resolution of main.
	WaitingSource string `json:"waitingSource,omitempty"`
	// Notes say what the summary could not take into account, such as
	// waits recorded for an older commit of main.
	Notes []string `json:"notes,omitempty"`
	// Rotations lists the rotations in progress, when the caller asked
	// vaultd.
	Rotations []Rotation `json:"rotations,omitempty"`
	// Failed and Stale count nodes in those states (Refused counts as
	// failed, Never as stale); Removed counts nodes removed from the mesh,
	// which are neither.
	Failed  int `json:"failed"`
	Stale   int `json:"stale"`
	Removed int `json:"removed"`
}

// OK reports whether no node failed, was refused or is stale.
func (s *Summary) OK() bool { return s.Failed == 0 && s.Stale == 0 }

// Summarize judges every node.
func Summarize(nodes []Node, opts SummaryOptions) *Summary {
	s := &Summary{Nodes: []Entry{}}
	limit := time.Duration(opts.StaleAfter) * opts.Interval
	for _, n := range nodes {
		e := Entry{Node: n.Name, Latest: n.Latest}
		r := n.Report
		switch {
		case r == nil && n.Removed:
			e.State = Removed
		case r == nil:
			e.State = Never
		default:
			e.Applied, e.Attempted, e.When, e.Refused = r.Generation, r.Attempted, r.Time, r.Refused
			e.LeftFiles = r.LeftFiles
			for _, res := range r.Resources {
				switch res.Outcome {
				case declaration.Failed:
					e.Failures = append(e.Failures, res)
				case declaration.Gated:
					e.Gated = append(e.Gated, res.ID)
				}
			}
			switch {
			case n.Removed:
				// Whatever its last report says, the node is gone: its
				// applied generation says whether it emptied itself.
				e.State = Removed
			case r.Refused != "":
				e.State = Refused
			case len(e.Failures) > 0 || len(e.Gated) > 0:
				e.State = Failed
			case limit > 0 && opts.Now.Sub(r.Time) > limit:
				e.State = Stale
			case r.Generation < n.Latest:
				e.State = Behind
			default:
				e.State = Current
			}
		}
		switch e.State {
		case Failed, Refused:
			s.Failed++
		case Stale, Never:
			s.Stale++
		case Removed:
			s.Removed++
		}
		s.Nodes = append(s.Nodes, e)
	}
	return s
}

// WriteJSON writes s as indented JSON.
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText writes s as a table, one node a line, then each failure and the
// gated resources under its node.
func (s *Summary) WriteText(w io.Writer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tAPPLIED\tLATEST\tREPORTED")
	for _, e := range s.Nodes {
		when := "never"
		if !e.When.IsZero() {
			when = now.Sub(e.When).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", e.Node, e.State, e.Applied, e.Latest, when)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range s.Nodes {
		if e.State == Removed {
			if e.Applied >= e.Latest {
				fmt.Fprintf(w, "%s: removed from the mesh; its containers are gone (generation %d applied)\n", e.Node, e.Latest)
			} else {
				fmt.Fprintf(w, "%s: removed from the mesh; its hostd has not applied the empty generation %d yet\n", e.Node, e.Latest)
			}
			continue
		}
		if e.Refused != "" {
			fmt.Fprintf(w, "%s: refused generation %d: %s\n", e.Node, e.Attempted, e.Refused)
		}
		for _, f := range e.Failures {
			fmt.Fprintf(w, "%s: %s failed: %s\n", e.Node, f.ID, f.Reason)
		}
		if len(e.Gated) > 0 {
			fmt.Fprintf(w, "%s: gated: %s\n", e.Node, strings.Join(e.Gated, ", "))
		}
		for _, f := range e.LeftFiles {
			fmt.Fprintf(w, "%s: still holds %s, a secret no longer declared: %s\n", e.Node, f.Path, f.Reason)
		}
	}
	for _, ro := range s.Rotations {
		fmt.Fprintf(w, "rotating: %s from version %d to %d, %s, waits on %s\n",
			ro.Secret, ro.From, ro.To, ro.Phase, strings.Join(ro.WaitsOn, ", "))
	}
	for _, x := range s.Waiting {
		if x.Hint != "" {
			// An operator must act: an operator's secret not delivered.
			fmt.Fprintf(w, "waiting: %s needs %s from %s, which an operator must deliver; hint: %s\n",
				x.Assignment, x.Requirement, x.Provider, x.Hint)
			continue
		}
		fmt.Fprintf(w, "waiting: %s needs %s (%s) from %s, answered by its step %s\n",
			x.Assignment, x.Requirement, strings.Join(x.Fields, ", "), x.Provider, x.Answer)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
