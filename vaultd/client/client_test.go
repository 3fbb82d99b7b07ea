package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{in: `"720h"`, want: 720 * time.Hour},
		{in: `"1h30m"`, want: 90 * time.Minute},
		{in: `"30 days"`, err: true},
		{in: `30`, err: true},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err != nil) != tt.err || time.Duration(d) != tt.want {
			t.Fatalf("%s: %v %v, want %v (error %v)", tt.in, time.Duration(d), err, tt.want, tt.err)
		}
		if err != nil {
			continue
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Fatalf("%s does not round-trip: %s", tt.in, b)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	for code, sentinel := range codeErr {
		e := &Error{Code: code, Message: "m"}
		if !errors.Is(e, sentinel) {
			t.Fatalf("code %s does not unwrap to %v", code, sentinel)
		}
		if CodeOf(e) != code {
			t.Fatalf("CodeOf(%s) = %s", code, CodeOf(e))
		}
	}
	if e := (&Error{Code: "from-a-newer-vaultd"}); !errors.Is(e, ErrInternal) {
		t.Fatal("an unknown code is not an internal error")
	}
	if CodeOf(errors.New("disk full")) != CodeInternal {
		t.Fatal("a plain error is not internal")
	}
}

// TestSealBatchOfAnOlderVaultd: a vaultd without /v1/seal-batch answers it
// as any unknown route (404, "not-found"); SealBatch says so, as an
// ErrNotFound the caller falls back on.
func TestSealBatchOfAnOlderVaultd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "v.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(ErrorBody{Code: CodeNotFound, Error: "no such endpoint", Hint: "the API is under /v1 (see package vaultd/client)"})
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c := Dial(sock)
	defer c.Close()
	res, err := c.SealBatch(context.Background(), []SealRequest{{Name: "a", Recipients: []string{"age1x"}}})
	if res != nil || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "has no batch seal (it is older than this client") {
		t.Fatalf("an older vaultd: %v %v", res, err)
	}
}
