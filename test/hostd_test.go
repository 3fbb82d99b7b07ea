package test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/meshgen/meshgen/hostd"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/internal/ocitest"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestHostdAppliesAndStatusReflects: the real hostd, enrolled with the
// reconciler's public key, fetches node/n3, verifies the signature, decrypts
// its secrets with its own identity, applies in order under its root, and
// pushes its report to status/n3; `meshgen status` reads it. No registry is
// reachable, so the lab's first container fails and everything after it is
// gated: the report, and status, say exactly that.
func TestHostdAppliesAndStatusReflects(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	root := filepath.Join(t.TempDir(), "root")
	stateDir := filepath.Join(t.TempDir(), "hostd")
	recipient, err := hostd.Init(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	// The node's identity is made on the node (hostd init); its root is a
	// temporary directory.
	p := filepath.Join(m.Work, "nodes", "n3.yaml")
	b := regexp.MustCompile(`(?m)^recipient: .*$`).ReplaceAllString(readFile(t, p), "recipient: "+recipient)
	if err := os.WriteFile(p, []byte(b+"root: "+root+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Push(t, "enrol n3 with its own identity")

	r, pub := newReconciler(t, m, vaulttest.Start(t), io.Discard)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	pubFile := enrolmentKey(t, pub)
	// A private store, reset at cleanup so no overlay mount is left behind.
	store := ocitest.NewStore(t)
	h, err := hostd.New(hostd.Config{
		Node: "n3", Mesh: "lab", Remote: "file://" + m.Bare, PushURL: "file://" + m.Bare,
		PublicKey: pubFile, Identity: filepath.Join(stateDir, hostd.IdentityFile),
		StateDir: stateDir, Root: root,
		Podman: hostd.PodmanConfig{Root: store.Root, RunRoot: store.RunRoot, TmpDir: store.TmpDir},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.Once(ctx)
	if err == nil {
		t.Fatal("hostd applied the lab without its images")
	}
	if rep.Refused != "" {
		t.Fatalf("hostd refused the reconciler's branch: %s", rep.Refused)
	}
	var failed, gated, done int
	for _, res := range rep.Resources {
		switch res.Outcome {
		case declaration.Failed:
			failed++
		case declaration.Gated:
			gated++
		case declaration.Created, declaration.Kept, declaration.Unchanged:
			done++
		}
	}
	if failed != 1 || gated == 0 || done == 0 {
		t.Fatalf("report: %d done, %d failed, %d gated; want some done, one failed, the rest gated", done, failed, gated)
	}
	// Every secret file it wrote before the failure holds what the sealed
	// file on the branch opens to with the node's own identity.
	var d declaration.Declaration
	if err := jsonUnmarshal(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n3:declaration.json"), &d); err != nil {
		t.Fatal(err)
	}
	idText, err := os.ReadFile(filepath.Join(stateDir, hostd.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := age.ParseIdentities(strings.NewReader(string(idText)))
	if err != nil {
		t.Fatal(err)
	}
	outcome := map[string]declaration.Outcome{}
	for _, res := range rep.Resources {
		outcome[res.ID] = res.Outcome
	}
	checked := 0
	for _, res := range d.Resources {
		if res.File == nil || res.File.Secret == nil || outcome[res.ID] != declaration.Created {
			continue
		}
		ct := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n3:"+res.File.Secret.Sealed)
		want := vaulttest.Open(t, ids[0], []byte(ct))
		if res.File.Secret.EnvVar != "" {
			want = []byte(res.File.Secret.EnvVar + "=" + string(want) + "\n")
		}
		got, err := os.ReadFile(res.File.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s does not hold the sealed value", res.ID)
		}
		checked++
	}
	if checked == 0 {
		t.Error("hostd wrote no secret file before the failure; the test checks nothing about secrets")
	}

	nodes, err := status.Read(m.Bare, status.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := status.Summarize(nodes, status.SummaryOptions{Now: time.Now(), Interval: time.Minute, StaleAfter: 3})
	var n3 *status.Entry
	for i := range sum.Nodes {
		if sum.Nodes[i].Node == "n3" {
			n3 = &sum.Nodes[i]
		}
	}
	if n3 == nil || n3.State != status.Failed || n3.Latest != d.Generation || n3.Attempted != d.Generation ||
		len(n3.Failures) != 1 || len(n3.Gated) != gated {
		t.Fatalf("status of n3: %+v", n3)
	}
	if sum.OK() {
		t.Fatalf("status is OK with a failed node: %+v", sum)
	}
}
