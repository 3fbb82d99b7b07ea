package hostd

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/sigstore/cosign/v2/pkg/cosign"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// A signature made the way `cosign sign-blob --key cosign.key` makes one,
// from an encrypted cosign key pair, verifies against the cosign.pub; one
// byte off, or another pair's public key, does not.
func TestVerifySignatureOfACosignKeyPair(t *testing.T) {
	pass := func(bool) ([]byte, error) { return []byte("test-password"), nil }
	keys, err := cosign.GenerateKeyPair(pass)
	if err != nil {
		t.Fatal(err)
	}
	other, err := cosign.GenerateKeyPair(pass)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := cosign.LoadPrivateKey(keys.PrivateBytes, []byte("test-password"), nil)
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte(`{"format":1}` + "\n")
	raw, err := sv.SignMessage(strings.NewReader(string(blob)))
	if err != nil {
		t.Fatal(err)
	}
	sig := []byte(base64.StdEncoding.EncodeToString(raw) + "\n")
	cases := []struct {
		name      string
		pub, blob []byte
		sig       []byte
		want      error
	}{
		{"as made", keys.PublicBytes, blob, sig, nil},
		{"another key", other.PublicBytes, blob, sig, ErrBadSignature},
		{"altered", keys.PublicBytes, []byte(`{"format":2}` + "\n"), sig, ErrBadSignature},
		{"not base64", keys.PublicBytes, blob, []byte("%%%"), ErrBadSignature},
		{"empty", keys.PublicBytes, blob, []byte(""), ErrUnsigned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifySignature(tc.pub, tc.blob, tc.sig)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// hostd init writes a 0600 identity, returns its recipient, and keeps it on
// a second run.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	r1, err := Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := age.ParseX25519Recipient(r1); err != nil {
		t.Fatalf("recipient %q: %v", r1, err)
	}
	fi, err := os.Stat(filepath.Join(dir, IdentityFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v %v", fi, err)
	}
	r2, err := Init(dir)
	if err != nil || r2 != r1 {
		t.Fatalf("second init: %q %v, want %q", r2, err, r1)
	}
	ids, err := readIdentity(filepath.Join(dir, IdentityFile))
	if err != nil || ids[0].(*age.X25519Identity).Recipient().String() != r1 {
		t.Fatalf("the identity does not match its recipient: %v", err)
	}
}

// An image that is not on the machine fails the step with podman's reason,
// and nothing is pulled (--pull=never).
func TestMissingImageIsNotPulled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	missing := "localhost/nothere@sha256:" + strings.Repeat("ab", 32)
	rep, err := f.apply(f.decl(ctrRes("m/web", declaration.Container{Name: f.cname("web"), Image: missing, Command: sleeper})))
	if err == nil {
		t.Fatal("a missing image applied")
	}
	r := expectOutcome(t, rep, "m/web", declaration.Failed)
	if !strings.Contains(r.Reason, "run container") {
		t.Fatalf("reason %q", r.Reason)
	}
	step := ctrRes("m/step", declaration.Container{Name: f.cname("step"), Image: missing, RunOnce: true})
	rep, _ = f.apply(f.decl(step))
	r = expectOutcome(t, rep, "m/step", declaration.Failed)
	if !strings.Contains(r.Reason, "podman failed") {
		t.Fatalf("reason %q", r.Reason)
	}
}

// The readable report and the textfile, against testdata: a failed apply
// (secret files held) and one that removed containers and secret files.
func TestReportFormats(t *testing.T) {
	for _, name := range []string{"report", "report-removed"} {
		data, err := os.ReadFile("testdata/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var rep declaration.Report
		if err := jsonUnmarshal(string(data), &rep); err != nil {
			t.Fatal(err)
		}
		for _, g := range []struct{ file, got string }{
			{"testdata/" + name + ".txt", FormatText(rep)},
			{"testdata/" + name + ".prom", Textfile(rep)},
		} {
			if os.Getenv("HOSTD_UPDATE_GOLDEN") != "" {
				os.WriteFile(g.file, []byte(g.got), 0o644)
			}
			want, err := os.ReadFile(g.file)
			if err != nil {
				t.Fatal(err)
			}
			if g.got != string(want) {
				t.Errorf("%s differs:\n%s", g.file, g.got)
			}
		}
	}
}
