package declaration

import "time"

// Outcome is what happened to one resource in one apply.
type Outcome string

// The outcomes hostd reports (DESIGN.md).
const (
	Created   Outcome = "created"   // it did not exist and now does
	Corrected Outcome = "corrected" // it had drifted and was put back
	Unchanged Outcome = "unchanged" // it already matched
	Kept      Outcome = "kept"      // a create-once file was present and left alone (ADR 0087)
	Ran       Outcome = "ran"       // a run-once step ran to completion (ADR 0052)
	Recreated Outcome = "recreated" // a container was replaced; Reason says why
	Failed    Outcome = "failed"    // applying it failed; Reason says why
	Gated     Outcome = "gated"     // not reached because an earlier resource failed
)

// ReportFile is the file name of a report on branch status/<node>.
const ReportFile = "report.json"

// Report is what hostd pushes to branch status/<node> after each apply: the
// outcome of every resource and the answers providers' steps wrote.
type Report struct {
	Mesh string `json:"mesh"`
	Node string `json:"node"`
	// Generation is the generation now applied: the one attempted when the
	// apply succeeded, else the last one that did.
	Generation uint64 `json:"generation"`
	// Attempted is the generation this apply tried.
	Attempted uint64 `json:"attempted"`
	// Source is the attempted declaration's source commit on main.
	Source string `json:"source"`
	// Time is when the apply finished.
	Time time.Time `json:"time"`
	// Refused, when set, says why the declaration was not applied at all
	// (bad signature, replay, another node); nothing was changed.
	Refused string `json:"refused,omitempty"`
	// Resources holds one result per resource, in declared order.
	Resources []Result `json:"resources,omitempty"`
	// Answers holds, per resource ID of a provider's step, the contract fields
	// it wrote to its Answer file.
	Answers map[string]map[string]string `json:"answers,omitempty"`
	// Removed names the containers hostd had made for this node that the
	// declaration no longer names, removed after everything else applied.
	// Directories and files that are not secrets are never removed (ADR 0030).
	Removed []string `json:"removed,omitempty"`
	// RemovedFiles are the paths of files hostd had written from a sealed
	// secret that the declaration no longer names at that path, removed after
	// everything else applied: a retired or abandoned credential does not stay
	// on the node's disk (design 27, "Rotation"). Content and create-once files
	// are never removed: they may be data a service edits.
	RemovedFiles []string `json:"removedFiles,omitempty"`
	// LeftFiles are such secret files hostd did not remove in this apply, each
	// with the reason: the apply failed (they are removed once one succeeds),
	// or the path no longer holds the file hostd wrote.
	LeftFiles []LeftFile `json:"leftFiles,omitempty"`
}

// LeftFile is a secret file no longer declared that an apply did not remove.
type LeftFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Result is one resource's outcome in a [Report].
type Result struct {
	ID      string  `json:"id"`
	Kind    Kind    `json:"kind"`
	Outcome Outcome `json:"outcome"`
	// Reason says why a resource was recreated, corrected, failed or gated.
	Reason string `json:"reason,omitempty"`
	// Digest is the resource's digest from [Declaration.Digests].
	Digest string `json:"digest,omitempty"`
}

// OK reports whether the apply succeeded: nothing refused, failed or gated.
func (r *Report) OK() bool {
	if r.Refused != "" {
		return false
	}
	for _, res := range r.Resources {
		if res.Outcome == Failed || res.Outcome == Gated {
			return false
		}
	}
	return true
}
