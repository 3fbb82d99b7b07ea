package vaultd_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// nobody is the uid of the "other user" tests run requests as.
const nobody = 65534

// TestOnlyTheOwnerIsAnswered runs vaultd, checks its socket is 0600, then
// makes requests from another uid: first refused by the socket's mode, then,
// with the mode opened on purpose, refused by the peer-credential check.
func TestOnlyTheOwnerIsAnswered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a request as another uid")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("needs curl to make a request as another uid")
	}
	sockDir := shortDir(t)
	out := &syncBuffer{}
	d := startDaemon(t, filepath.Join(t.TempDir(), "vault"), sockDir, out)
	fi, err := os.Stat(d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode())
	}
	asNobody := func() (string, error) {
		cmd := exec.Command(curl, "-sS", "--unix-socket", d.sock, "http://vaultd/v1/status")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if err := os.Chmod(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The socket's mode stops another uid.
	got, err := asNobody()
	if err == nil || !strings.Contains(got, "Permission denied") && !strings.Contains(got, "Couldn't connect") {
		t.Fatalf("another uid reached a 0600 socket: %v %s", err, got)
	}
	// With the mode opened, the peer-credential check still refuses it.
	if err := os.Chmod(d.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	got, err = asNobody()
	if err != nil || !strings.Contains(got, `"code":"forbidden"`) || !strings.Contains(got, "only the socket's owner (uid 0) may talk to vaultd") {
		t.Fatalf("another uid was not refused by its credentials: %v %s", err, got)
	}
	audit, err := os.ReadFile(filepath.Join(d.dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), `"uid":65534`) || !strings.Contains(string(audit), `"outcome":"forbidden"`) {
		t.Fatalf("the refused request is not audited with its uid:\n%s", audit)
	}
	// The owner is answered.
	if _, err := d.client.Status(context.Background()); err != nil {
		t.Fatalf("the owner was refused: %v", err)
	}
}

// TestNoValueInAnyOutput makes secrets of every origin with the real vaultd,
// drives every refusal and malformed request, and then greps everything
// vaultd wrote or answered (its output, the audit log, every error body,
// every file in its directory) for every value it holds: none may appear.
func TestNoValueInAnyOutput(t *testing.T) {
	ctx := context.Background()
	f := &fixture{prov: vaulttest.NewNode(t), reader: vaulttest.NewNode(t), stranger: vaulttest.NewNode(t)}
	nodes := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(nodes, []byte("# the mesh's nodes\nn1 "+f.prov.Recipient().String()+"\nn2 "+f.reader.Recipient().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	d := startDaemon(t, filepath.Join(t.TempDir(), "vault"), shortDir(t), out, "--nodes", nodes)
	values := f.setUp(t, ctx, d.client)
	if len(values) < 8 {
		t.Fatalf("only %d values to look for", len(values))
	}

	var answers bytes.Buffer
	for _, tt := range f.cases() {
		err := tt.do(ctx, d.client)
		ce, ok := err.(*client.Error)
		if !ok {
			t.Fatalf("%s: %v, want a refusal", tt.name, err)
		}
		answers.WriteString(ce.Message + "\n" + ce.Hint() + "\n")
	}
	// The same refusals in a batch, beside new secrets whose values are
	// looked for too.
	batch := []client.SealRequest{
		{Name: "batch-a", Recipients: []string{f.reader.Recipient().String()}},
		{Name: "batch-b", Spec: client.Spec{Format: client.FormatBcrypt, Rotation: client.TwoParty}, Appliers: []string{f.prov.Recipient().String()}, Recipients: []string{f.reader.Recipient().String()}},
	}
	for _, c := range f.sealRefusals() {
		batch = append(batch, c.req)
	}
	results, err := d.client.SealBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range results {
		if i < 2 {
			if res.Err != nil {
				t.Fatalf("%s: %v", batch[i].Name, res.Err)
			}
			for _, s := range res.Response.Sealed {
				id := f.reader
				if s.Recipient == f.prov.Recipient().String() {
					id = f.prov
				}
				values = append(values, vaulttest.Open(t, id, s.Ciphertext))
			}
			continue
		}
		ce, ok := res.Err.(*client.Error)
		if !ok {
			t.Fatalf("batch item %d: %v, want a refusal", i, res.Err)
		}
		answers.WriteString(ce.Message + "\n" + ce.Hint() + "\n")
	}
	// Malformed requests, raw.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/seal", "{not json " + string(values[0])},
		{"POST", "/v1/seal", `{"name":"x","recipients":["` + string(values[0]) + `"]}`},
		{"POST", "/v1/seal", `{"name":"` + string(values[1]) + `!","recipients":[]}`},
		{"POST", "/v1/put", `{"name":"x","ciphertext":"` + base64.StdEncoding.EncodeToString(values[2]) + `"}`},
		{"POST", "/v1/put", `{"name":"x","ciphertext":"not base64"}`},
		{"POST", "/v1/seal", `{"name":"x","unknown":1}`},
		{"POST", "/v1/seal-batch", "{not json " + string(values[0])},
		{"POST", "/v1/seal-batch", `{"requests":"` + string(values[0]) + `"}`},
		{"POST", "/v1/seal-batch", `{"requests":[{"name":"x","recipients":"` + string(values[1]) + `"}]}`},
		{"POST", "/v1/seal", `{"name":5}`},
		{"GET", "/v1/seal", ""},
		{"GET", "/v2/everything", ""},
		{"DELETE", "/v1/status", ""},
	} {
		req, _ := http.NewRequest(r.method, "http://vaultd"+r.path, strings.NewReader(r.body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("%s %s answered %s", r.method, r.path, resp.Status)
		}
		answers.Write(b)
	}
	// Refused batch items are answered with 200 and an error per item.
	for _, body := range []string{
		`{"requests":[{"name":"x","recipients":["` + string(values[0]) + `"]}]}`,
		`{"requests":[{"name":"` + string(values[1]) + `!","recipients":["` + f.reader.Recipient().String() + `"]}]}`,
		`{"requests":[{"name":"x","recipients":["` + f.reader.Recipient().String() + `"],"spec":{"alphabet":"` + string(values[2]) + `"}}]}`,
	} {
		resp, err := hc.Post("http://vaultd/v1/seal-batch", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte(`"error":{"code":"bad-request"`)) {
			t.Fatalf("batch item not refused: %s", resp.Status)
		}
		answers.Write(b)
	}
	// Status and a restart's output are output too.
	st, err := d.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	answers.WriteString(strings.Join(names(st), ","))
	d.stop(t)

	sources := map[string][]byte{"daemon output": out.Bytes(), "answers": answers.Bytes()}
	filepath.WalkDir(d.dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := os.ReadFile(p)
			sources[p] = b
		}
		return nil
	})
	audit := sources[filepath.Join(d.dir, "audit.log")]
	for _, want := range []string{`"op":"POST /v1/rotate","names":["frozen"]`, `"outcome":"not-rotatable"`, `"op":"POST /v1/seal","names":["two"]`, `"op":"GET (no such endpoint)"`, `"op":"POST /v1/seal-batch","names":["batch-b"]`, `"op":"POST /v1/seal-batch","names":["(invalid name)"]`} {
		if !bytes.Contains(audit, []byte(want)) {
			t.Fatalf("the audit log does not record %s:\n%s", want, audit)
		}
	}
	// The vault's own identity never leaves its file.
	idPath := filepath.Join(d.dir, "identity")
	id := bytes.TrimSpace(sources[idPath])
	if !bytes.HasPrefix(id, []byte("AGE-SECRET-KEY-")) {
		t.Fatal("no identity file")
	}
	for src, b := range sources {
		if src != idPath && bytes.Contains(b, id) {
			t.Errorf("the vault's identity appears in %s", src)
		}
	}
	for _, v := range values {
		forms := [][]byte{v, []byte(base64.StdEncoding.EncodeToString(v)), []byte(hex.EncodeToString(v))}
		for src, b := range sources {
			for _, form := range forms {
				if bytes.Contains(b, form) {
					t.Errorf("a value (length %d) appears in %s", len(v), src)
				}
			}
		}
	}
}

func names(st *client.Status) []string {
	var out []string
	for _, s := range st.Secrets {
		out = append(out, s.Name)
	}
	return out
}
