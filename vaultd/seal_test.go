package vaultd_test

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
	"golang.org/x/crypto/bcrypt"
)

func recipients(ids ...*age.X25519Identity) []string {
	var out []string
	for _, id := range ids {
		out = append(out, id.Recipient().String())
	}
	return out
}

// one returns the single item sealed to id in role.
func one(t *testing.T, resp *client.SealResponse, id *age.X25519Identity, role client.Role, item client.Item) client.Sealed {
	t.Helper()
	var found []client.Sealed
	for _, s := range resp.For(id.Recipient().String(), role) {
		if s.Item == item {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %s: %d %s items sealed, want 1: %+v", role, id.Recipient(), len(found), item, resp.Sealed)
	}
	return found[0]
}

func TestSealMakesOnceAndSealsTheSameBytes(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	prov, r1, r2 := vaulttest.NewNode(t), vaulttest.NewNode(t), vaulttest.NewNode(t)
	req := client.SealRequest{
		Name:       "db/gitea",
		Spec:       client.Spec{Length: 24, Alphabet: client.AlphabetHex, Format: client.FormatMosquittoPBKDF2},
		Appliers:   recipients(prov),
		Recipients: recipients(r1, r2),
	}
	first, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Version != 1 || first.Origin != client.OriginMesh {
		t.Fatalf("version %d origin %s, want 1 mesh", first.Version, first.Origin)
	}
	val := vaulttest.Open(t, r1, one(t, first, r1, client.RoleReader, client.ItemValue).Ciphertext)
	if !regexp.MustCompile(`^[0-9a-f]{24}$`).Match(val) {
		t.Fatalf("value is not 24 hex characters (length %d)", len(val))
	}
	if got := vaulttest.Open(t, r2, one(t, first, r2, client.RoleReader, client.ItemValue).Ciphertext); !bytes.Equal(got, val) {
		t.Fatal("two readers hold different values")
	}
	if got := vaulttest.Open(t, prov, one(t, first, prov, client.RoleApplier, client.ItemValue).Ciphertext); !bytes.Equal(got, val) {
		t.Fatal("the applier holds another value")
	}
	// Readers get the value only; the applier its derived form too.
	if n := len(first.For(r1.Recipient().String(), client.RoleReader)); n != 1 {
		t.Fatalf("reader holds %d items, want 1", n)
	}
	derived := vaulttest.Open(t, prov, one(t, first, prov, client.RoleApplier, client.ItemDerived).Ciphertext)
	checkMosquitto(t, string(derived), val)
	for _, s := range first.Sealed {
		if s.SHA256 != sha(s.Ciphertext) {
			t.Fatalf("sha256 %s does not match its ciphertext", s.SHA256)
		}
	}

	// Asked again, and after a restart: the same bytes.
	again, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sameSealed(t, first, again)
	v.Stop(t)
	v = vaulttest.StartWith(t, vaulttest.Options{Dir: v.Dir})
	after, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sameSealed(t, first, after)

	// A new recipient gets the same value; the others keep their bytes.
	r3 := vaulttest.NewNode(t)
	req.Recipients = recipients(r1, r2, r3)
	more, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := vaulttest.Open(t, r3, one(t, more, r3, client.RoleReader, client.ItemValue).Ciphertext); !bytes.Equal(got, val) {
		t.Fatal("a new reader got another value")
	}
	if !bytes.Equal(one(t, more, r1, client.RoleReader, client.ItemValue).Ciphertext, one(t, first, r1, client.RoleReader, client.ItemValue).Ciphertext) {
		t.Fatal("adding a reader changed another reader's ciphertext")
	}
}

func sameSealed(t *testing.T, a, b *client.SealResponse) {
	t.Helper()
	if len(a.Sealed) != len(b.Sealed) {
		t.Fatalf("%d sealed items, then %d", len(a.Sealed), len(b.Sealed))
	}
	for i := range a.Sealed {
		if !bytes.Equal(a.Sealed[i].Ciphertext, b.Sealed[i].Ciphertext) || a.Sealed[i].SHA256 != b.Sealed[i].SHA256 {
			t.Fatalf("item %d (%s %s) sealed to different bytes", i, a.Sealed[i].Role, a.Sealed[i].Item)
		}
	}
}

// checkMosquitto checks a "$7$" hash as mosquitto does: PBKDF2-SHA512 of the
// value with the salt and iterations it names.
func checkMosquitto(t *testing.T, hash string, value []byte) {
	t.Helper()
	f := strings.Split(hash, "$")
	if len(f) != 5 || f[1] != "7" {
		t.Fatalf("not a mosquitto $7$ hash: %d fields", len(f))
	}
	iter, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	salt, err := base64.StdEncoding.DecodeString(f[3])
	if err != nil {
		t.Fatal(err)
	}
	want, err := base64.StdEncoding.DecodeString(f[4])
	if err != nil {
		t.Fatal(err)
	}
	got, err := pbkdf2.Key(sha512.New, string(value), salt, iter, len(want))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || len(want) != 64 || len(salt) != 12 {
		t.Fatal("mosquitto hash does not verify the value")
	}
}

func TestSpecs(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	tests := []struct {
		spec  client.Spec
		value string // a regexp the value matches
		check func(t *testing.T, derived string, value []byte)
	}{
		{spec: client.Spec{}, value: `^[A-Za-z0-9]{32}$`},
		{spec: client.Spec{Length: 8, Alphabet: client.AlphabetAlnum}, value: `^[A-Za-z0-9]{8}$`},
		{spec: client.Spec{Length: 64, Alphabet: client.AlphabetHex}, value: `^[0-9a-f]{64}$`},
		{spec: client.Spec{Length: 43, Alphabet: client.AlphabetBase64URL}, value: `^[A-Za-z0-9_-]{43}$`},
		{spec: client.Spec{Length: 20, Format: client.FormatMosquittoPBKDF2}, value: `^[A-Za-z0-9]{20}$`, check: checkMosquitto},
		{spec: client.Spec{Length: 20, Format: client.FormatBcrypt}, value: `^[A-Za-z0-9]{20}$`, check: func(t *testing.T, derived string, value []byte) {
			if err := bcrypt.CompareHashAndPassword([]byte(derived), value); err != nil {
				t.Fatalf("bcrypt hash does not verify the value: %v", err)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.spec.Alphabet+tt.spec.Format+strconv.Itoa(tt.spec.Length), func(t *testing.T) {
			resp, err := v.Client.Seal(ctx, client.SealRequest{Name: "spec" + strconv.Itoa(i), Spec: tt.spec, Appliers: recipients(node), Recipients: recipients(node)})
			if err != nil {
				t.Fatal(err)
			}
			val := vaulttest.Open(t, node, one(t, resp, node, client.RoleReader, client.ItemValue).Ciphertext)
			if !regexp.MustCompile(tt.value).Match(val) {
				t.Fatalf("value of length %d does not match %s", len(val), tt.value)
			}
			ds := 0
			for _, s := range resp.Sealed {
				if s.Item == client.ItemDerived {
					ds++
					if tt.check == nil {
						t.Fatal("a derived form without a format")
					}
					tt.check(t, string(vaulttest.Open(t, node, s.Ciphertext)), val)
				}
			}
			if (tt.check != nil) != (ds == 1) {
				t.Fatalf("%d derived items", ds)
			}
		})
	}
	// Values are drawn anew: many of them are all different.
	seen := map[string]bool{}
	for i := range 50 {
		resp, err := v.Client.Seal(ctx, client.SealRequest{Name: "many" + strconv.Itoa(i), Spec: client.Spec{Length: 8, Alphabet: client.AlphabetHex}, Recipients: recipients(node)})
		if err != nil {
			t.Fatal(err)
		}
		seen[string(vaulttest.Open(t, node, resp.Sealed[0].Ciphertext))] = true
	}
	if len(seen) != 50 {
		t.Fatalf("50 secrets, %d distinct values", len(seen))
	}
}

func TestOperatorValue(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	seal := client.SealRequest{Name: "smtp-key", Spec: client.Spec{Operator: true}, Recipients: recipients(node)}

	_, err := v.Client.Seal(ctx, seal)
	if !errors.Is(err, client.ErrNotDelivered) || !strings.Contains(err.(*client.Error).Hint(), "meshgen vault put smtp-key") {
		t.Fatalf("seal before delivery: %v, want not delivered with a hint", err)
	}
	put := func(value string) *client.PutResponse {
		t.Helper()
		rcpt, err := v.Client.Recipient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ct, err := client.SealToVault(rcpt, []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := v.Client.Put(ctx, client.PutRequest{Name: "smtp-key", Ciphertext: ct})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := put("operator-chosen-1"); got.Version != 1 || got.Unchanged {
		t.Fatalf("first put: %+v", got)
	}
	resp, err := v.Client.Seal(ctx, seal)
	if err != nil {
		t.Fatal(err)
	}
	if got := vaulttest.Open(t, node, resp.Sealed[0].Ciphertext); string(got) != "operator-chosen-1" || resp.Origin != client.OriginOperator {
		t.Fatalf("sealed another value (origin %s)", resp.Origin)
	}
	if got := put("operator-chosen-1"); !got.Unchanged || got.Version != 1 {
		t.Fatalf("same value again: %+v", got)
	}
	// The vault never replaces it, whatever asks.
	_, err = v.Client.Rotate(ctx, "smtp-key")
	if !errors.Is(err, client.ErrOperatorValue) || !strings.Contains(err.Error(), "an operator delivers a new value with meshgen vault put") {
		t.Fatalf("rotate an operator's value: %v", err)
	}
	// An operator delivers a new one: a new version, its readers recreated.
	if got := put("operator-chosen-2"); got.Version != 2 {
		t.Fatalf("new value: %+v", got)
	}
	resp, err = v.Client.Seal(ctx, seal)
	if err != nil {
		t.Fatal(err)
	}
	if got := vaulttest.Open(t, node, resp.Sealed[0].Ciphertext); string(got) != "operator-chosen-2" || resp.Version != 2 {
		t.Fatalf("after a new put: version %d", resp.Version)
	}
	// A maximum age never rotates it either.
	seal.Spec.MaxAge = client.Duration(1)
	if resp, err = v.Client.Seal(ctx, seal); err != nil || resp.Rotation != nil {
		t.Fatalf("max age on an operator's value: %v %+v", err, resp)
	}
}

func TestAdoptGenesisValues(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	rcpt, err := v.Client.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seal := func(s string) []byte {
		ct, err := client.SealToVault(rcpt, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	req := client.AdoptRequest{Secrets: []client.AdoptSecret{
		{Name: "store-superuser", Ciphertext: seal("genesis-made-superuser-pw")},
		{Name: "broker-admin", Spec: client.Spec{Format: client.FormatMosquittoPBKDF2}, Ciphertext: seal("genesis-made-broker-pw"), Derived: seal("$7$101$genesis-hash")},
	}}
	resp, err := v.Client.Adopt(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Adopted) != 2 || resp.Adopted[0].Name != "broker-admin" || resp.Adopted[0].Version != 1 {
		t.Fatalf("adopted %+v", resp.Adopted)
	}
	sr, err := v.Client.Seal(ctx, client.SealRequest{Name: "broker-admin", Spec: client.Spec{Format: client.FormatMosquittoPBKDF2}, Appliers: recipients(node), Recipients: recipients(node)})
	if err != nil {
		t.Fatal(err)
	}
	if sr.Origin != client.OriginGenesis {
		t.Fatalf("origin %s, want genesis", sr.Origin)
	}
	if got := vaulttest.Open(t, node, one(t, sr, node, client.RoleReader, client.ItemValue).Ciphertext); string(got) != "genesis-made-broker-pw" {
		t.Fatal("adopted value not sealed")
	}
	// The derived form genesis gave the broker is kept: nothing changes there.
	if got := vaulttest.Open(t, node, one(t, sr, node, client.RoleApplier, client.ItemDerived).Ciphertext); string(got) != "$7$101$genesis-hash" {
		t.Fatal("adopted derived form not kept")
	}
	// A retry is harmless; another value for a held name is refused.
	again, err := v.Client.Adopt(ctx, req)
	if err != nil || !again.Adopted[0].Unchanged || !again.Adopted[1].Unchanged {
		t.Fatalf("adopt again: %v %+v", err, again)
	}
	_, err = v.Client.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: "store-superuser", Ciphertext: seal("another")}}})
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("adopt another value: %v, want conflict", err)
	}
	// The mesh's own: rotatable, unlike an operator's value.
	rot, err := v.Client.Rotate(ctx, "store-superuser")
	if err != nil {
		t.Fatalf("rotate an adopted value: %v", err)
	}
	if rot.To != 2 {
		t.Fatalf("rotated to %d", rot.To)
	}
}

// TestConcurrentSealsAgree seals the same new secrets from many clients at
// once: each is made once, and every client gets the same bytes.
func TestConcurrentSealsAgree(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	const clients, secrets = 8, 20
	got := make([][]string, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range secrets {
				resp, err := v.Client.Seal(ctx, client.SealRequest{Name: "s" + strconv.Itoa(i), Recipients: recipients(node)})
				if err != nil {
					t.Error(err)
					return
				}
				got[c] = append(got[c], resp.Sealed[0].SHA256)
			}
		}()
	}
	wg.Wait()
	for c := 1; c < clients; c++ {
		if !slices.Equal(got[c], got[0]) {
			t.Fatalf("client %d got other ciphertexts than client 0", c)
		}
	}
}

// TestFormatChange: a secret whose spec asks for another derived form gets
// it derived again and sealed again, the value unchanged; asked for none, it
// has none.
func TestFormatChange(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	prov := vaulttest.NewNode(t)
	req := client.SealRequest{Name: "broker/app", Spec: client.Spec{Length: 20, Format: client.FormatMosquittoPBKDF2}, Appliers: recipients(prov), Recipients: recipients(prov)}
	first, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	val := vaulttest.Open(t, prov, one(t, first, prov, client.RoleApplier, client.ItemValue).Ciphertext)
	checkMosquitto(t, string(vaulttest.Open(t, prov, one(t, first, prov, client.RoleApplier, client.ItemDerived).Ciphertext)), val)

	req.Spec.Format = client.FormatBcrypt
	second, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := vaulttest.Open(t, prov, one(t, second, prov, client.RoleApplier, client.ItemValue).Ciphertext); !bytes.Equal(got, val) || second.Version != 1 {
		t.Fatal("a format change changed the value")
	}
	hash := vaulttest.Open(t, prov, one(t, second, prov, client.RoleApplier, client.ItemDerived).Ciphertext)
	if err := bcrypt.CompareHashAndPassword(hash, val); err != nil {
		t.Fatalf("after a format change the derived form is not a bcrypt hash of the value: %v", err)
	}

	req.Spec.Format = ""
	third, err := v.Client.Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range third.Sealed {
		if s.Item == client.ItemDerived {
			t.Fatal("a derived form is still sealed with no format asked")
		}
	}
}
