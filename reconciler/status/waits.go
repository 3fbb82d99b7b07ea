package status

import (
	"encoding/json"
	"fmt"

	"github.com/meshgen/meshgen/reconciler/branch"
)

// WaitsFile is the file on the reconciler's branch meshgen/state
// ([branch.StateRef]) where each reconcile that resolved main records what
// waited: the consumers waiting for a provider's answer not reported yet,
// and those waiting for an operator's secret not delivered to vaultd yet.
// Only the reconciler, which asks vaultd, knows the second kind; `meshgen
// status` shows both from this record, without a vault.
const WaitsFile = "waiting.json"

// Waits is the record in [WaitsFile].
type Waits struct {
	// Source is the commit of main the reconcile resolved: the waits are
	// as of that commit.
	Source string `json:"source"`
	// Waiting lists every requirement that waited, in assignment order;
	// empty when none did.
	Waiting []Waiting `json:"waiting"`
}

// Marshal is the record's content, as the reconciler writes it. The same
// waits for the same commit are the same bytes, so a reconcile that changes
// nothing commits nothing.
func (w *Waits) Marshal() ([]byte, error) {
	if w.Waiting == nil {
		w.Waiting = []Waiting{}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("record waits: %w", err)
	}
	return b, nil
}

// ReadWaits returns the waits the last reconcile recorded in the repository
// at dir, or nil when none is recorded (no reconcile yet, or one by a
// reconciler that did not record them).
func ReadWaits(dir string) (*Waits, error) {
	files, err := branch.ReadStateFiles(dir)
	if err != nil {
		return nil, err
	}
	b, ok := files[WaitsFile]
	if !ok {
		return nil, nil
	}
	var w Waits
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("read %s:%s: %w: reconcile again to rewrite it", branch.StateRef, WaitsFile, err)
	}
	return &w, nil
}
