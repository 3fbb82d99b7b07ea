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
}

func openAudit(dir string) (*auditLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "audit.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the audit log: %w", err)
	}
	return &auditLog{f: f}, nil
}

func (a *auditLog) write(e entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.f.Write(b); err != nil {
		return fmt.Errorf("write the audit log: %w", err)
	}
	if e.sync {
		return a.f.Sync()
	}
	return nil
}

func (a *auditLog) close() error { return a.f.Close() }
