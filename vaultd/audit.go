package vaultd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	b := make([]byte, 0, 256*len(es))
	sync := false
	for i := range es {
		var err error
		if b, err = appendEntry(b, &es[i]); err != nil {
			return err
		}
		b = append(b, '\n')
		sync = sync || es[i].sync
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

// appendEntry appends e as json.Marshal writes it: by hand (a batch seal
// writes a line per secret), or by json.Marshal for a time json.Marshal
// writes otherwise than appendTime (outside UTC). The test checks both
// agree.
func appendEntry(b []byte, e *entry) ([]byte, error) {
	start := len(b)
	b = append(b, `{"time":`...)
	b, ok := appendTime(b, e.Time)
	if !ok {
		line, err := json.Marshal(e)
		return append(b[:start], line...), err
	}
	b = strconv.AppendInt(append(b, `,"uid":`...), int64(e.UID), 10)
	b = strconv.AppendInt(append(b, `,"pid":`...), int64(e.PID), 10)
	if e.Peer != "" {
		b = appendString(append(b, `,"peer":`...), e.Peer)
	}
	b = appendString(append(b, `,"op":`...), e.Op)
	for _, l := range []struct {
		name string
		list []string
	}{{`,"names":[`, e.Names}, {`,"recipients":[`, e.Recipients}} {
		if len(l.list) == 0 {
			continue
		}
		b = append(b, l.name...)
		for i, s := range l.list {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	if e.Version != 0 {
		b = strconv.AppendUint(append(b, `,"version":`...), e.Version, 10)
	}
	b = appendString(append(b, `,"outcome":`...), e.Outcome)
	if e.Error != "" {
		b = appendString(append(b, `,"error":`...), e.Error)
	}
	return append(b, '}'), nil
}
