package vaultd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// auditLog is the append-only record of who asked for what: caller, request,
// secret names, recipients, versions and the outcome. It never holds a value:
// entries are built from fields that are never values (see [entry]).
type auditLog struct {
	mu sync.Mutex
	f  *os.File
}

// entry is one audit line.
type entry struct {
	Time time.Time `json:"time"`
	UID  int       `json:"uid"`
	PID  int       `json:"pid"`
	// Peer is a TLS client's certificate subject.
	Peer       string   `json:"peer,omitempty"`
	Op         string   `json:"op"`
	Names      []string `json:"names,omitempty"`
	Recipients []string `json:"recipients,omitempty"`
	Version    uint64   `json:"version,omitempty"`
	Outcome    string   `json:"outcome"`
	Error      string   `json:"error,omitempty"`
	// sync asks for the line to be on disk before the answer (a change).
	sync bool
	// items, when set, are written instead of this entry: a batch's one
	// line per secret.
	items []entry
}

func openAudit(dir string) (*auditLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "audit.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the audit log: %w", err)
	}
	return &auditLog{f: f}, nil
}

// write appends es, one line each, in one write; synced when any asks.
func (a *auditLog) write(es ...entry) error {
	var b []byte
	sync := false
	for _, e := range es {
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
		sync = sync || e.sync
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.f.Write(b); err != nil {
		return fmt.Errorf("write the audit log: %w", err)
	}
	if sync {
		return a.f.Sync()
	}
	return nil
}

func (a *auditLog) close() error { return a.f.Close() }
