package vaultd_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// refusalCase is one request vaultd must refuse, and how.
type refusalCase struct {
	name string
	do   func(ctx context.Context, c *client.Client) error
	want error
	msg  string // the error names this
}

// fixture is what the refusal cases need: nodes of the mesh, a stranger,
// and secrets of every origin already made.
type fixture struct {
	prov, reader, stranger *age.X25519Identity
	vaultRecipient         string
}

// setUp makes the fixture's secrets in the vault c talks to and returns
// every value it made or delivered, for the leak checks.
func (f *fixture) setUp(t *testing.T, ctx context.Context, c *client.Client) [][]byte {
	t.Helper()
	var values [][]byte
	rcpt, err := c.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.vaultRecipient = rcpt
	collect := func(resp *client.SealResponse) {
		for _, s := range resp.Sealed {
			id := f.reader
			if s.Recipient == f.prov.Recipient().String() {
				id = f.prov
			}
			values = append(values, vaulttest.Open(t, id, s.Ciphertext))
		}
	}
	for _, req := range []client.SealRequest{
		{Name: "two", Spec: client.Spec{Rotation: client.TwoParty, Format: client.FormatBcrypt, Length: 40}, Appliers: []string{f.prov.Recipient().String()}, Recipients: []string{f.reader.Recipient().String()}},
		{Name: "one", Spec: client.Spec{Format: client.FormatMosquittoPBKDF2}, Appliers: []string{f.prov.Recipient().String()}, Recipients: []string{f.reader.Recipient().String()}},
		{Name: "frozen", Spec: client.Spec{NotRotatable: "taken at first initialisation only"}, Recipients: []string{f.reader.Recipient().String()}},
	} {
		resp, err := c.Seal(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		collect(resp)
	}
	opValue := []byte("operator-external-api-key-7f3c")
	ct, err := client.SealToVault(rcpt, opValue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, client.PutRequest{Name: "external", Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	genValue := []byte("genesis-made-superuser-9d2e")
	gct, _ := client.SealToVault(rcpt, genValue)
	if _, err := c.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: "genesis", Ciphertext: gct}}}); err != nil {
		t.Fatal(err)
	}
	// A rotation in progress, so its new values exist too.
	if _, err := c.Rotate(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Seal(ctx, client.SealRequest{Name: "two", Spec: client.Spec{Rotation: client.TwoParty, Format: client.FormatBcrypt, Length: 40}, Appliers: []string{f.prov.Recipient().String()}, Recipients: []string{f.reader.Recipient().String()}})
	if err != nil {
		t.Fatal(err)
	}
	collect(resp)
	return append(values, opValue, genValue)
}

func (f *fixture) cases() []refusalCase {
	prov, reader, stranger := f.prov.Recipient().String(), f.reader.Recipient().String(), f.stranger.Recipient().String()
	seal := func(req client.SealRequest) func(context.Context, *client.Client) error {
		return func(ctx context.Context, c *client.Client) error { _, err := c.Seal(ctx, req); return err }
	}
	confirm := func(step string, req client.ConfirmRequest) func(context.Context, *client.Client) error {
		return func(ctx context.Context, c *client.Client) error {
			var err error
			switch step {
			case "applied":
				_, err = c.ConfirmApplied(ctx, req)
			case "read":
				_, err = c.ConfirmRead(ctx, req)
			case "retired":
				_, err = c.ConfirmRetired(ctx, req)
			}
			return err
		}
	}
	rotate := func(name string) func(context.Context, *client.Client) error {
		return func(ctx context.Context, c *client.Client) error { _, err := c.Rotate(ctx, name); return err }
	}
	put := func(name string, value []byte) func(context.Context, *client.Client) error {
		return func(ctx context.Context, c *client.Client) error {
			ct := value
			if !strings.HasPrefix(string(value), "raw:") {
				var err error
				if ct, err = client.SealToVault(f.vaultRecipient, value); err != nil {
					return err
				}
			}
			_, err := c.Put(ctx, client.PutRequest{Name: name, Ciphertext: ct})
			return err
		}
	}
	var out []refusalCase
	for _, sr := range f.sealRefusals() {
		out = append(out, refusalCase{sr.name, seal(sr.req), sr.want, sr.msg})
	}
	return append(out, []refusalCase{
		{"rotate unknown", rotate("nothing"), client.ErrNotFound, `secret "nothing" does not exist`},
		{"rotate operator's", rotate("external"), client.ErrOperatorValue, "an operator delivers a new value with meshgen vault put"},
		{"rotate not rotatable", rotate("frozen"), client.ErrNotRotatable, `secret "frozen" is not rotatable: taken at first initialisation only`},
		{"rotate twice", rotate("two"), client.ErrConflict, "a rotation to version 2 is already applying"},
		{"abandon none", func(ctx context.Context, c *client.Client) error { _, err := c.Abandon(ctx, "one"); return err }, client.ErrNotFound, "no rotation in progress"},
		{"confirm unknown", confirm("applied", client.ConfirmRequest{Name: "nothing", Recipient: prov, Version: 2}), client.ErrNotFound, "does not exist"},
		{"confirm wrong version", confirm("applied", client.ConfirmRequest{Name: "two", Recipient: prov, Version: 7}), client.ErrConflict, "confirmed version 7, the rotation applying needs version 2"},
		{"confirm not a party", confirm("applied", client.ConfirmRequest{Name: "two", Recipient: reader, Version: 2}), client.ErrConflict, "does not wait on applier"},
		{"confirm out of turn", confirm("read", client.ConfirmRequest{Name: "two", Recipient: reader, Version: 2}), client.ErrConflict, "not reading yet"},
		{"retire out of turn", confirm("retired", client.ConfirmRequest{Name: "two", Recipient: prov, Version: 1}), client.ErrConflict, "the rotation is applying, not retiring yet"},
		{"confirm no rotation", confirm("read", client.ConfirmRequest{Name: "one", Recipient: reader, Version: 5}), client.ErrNotFound, "no rotation in progress"},
		{"confirm a stranger", confirm("read", client.ConfirmRequest{Name: "two", Recipient: stranger, Version: 2}), client.ErrRefusedRecipient, "not a node"},
		{"put over the mesh's own", put("one", []byte("operator-tries-this-value")), client.ErrConflict, `"one" is the mesh's own`},
		{"put not sealed to the vault", put("ext2", []byte("raw:plaintext-sent-in-clear-by-mistake")), client.ErrBadRequest, "not sealed to the vault's recipient"},
		{"put empty", put("ext2", []byte{}), client.ErrBadRequest, "1 to 65536 bytes"},
		{"adopt none", func(ctx context.Context, c *client.Client) error {
			_, err := c.Adopt(ctx, client.AdoptRequest{})
			return err
		}, client.ErrBadRequest, "no secrets"},
		{"adopt over another", func(ctx context.Context, c *client.Client) error {
			ct, _ := client.SealToVault(f.vaultRecipient, []byte("another-genesis-value-4a4a"))
			_, err := c.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: "genesis", Ciphertext: ct}}})
			return err
		}, client.ErrConflict, "already holds another value"},
		{"adopt an operator's", func(ctx context.Context, c *client.Client) error {
			ct, _ := client.SealToVault(f.vaultRecipient, []byte("genesis-operator-value-5b5b"))
			_, err := c.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: "g2", Spec: client.Spec{Operator: true}, Ciphertext: ct}}})
			return err
		}, client.ErrBadRequest, "not an operator's"},
	}...)
}

// sealRefusal is a seal request vaultd must refuse, and how: alone
// ([Client.Seal]) or in a batch ([Client.SealBatch]).
type sealRefusal struct {
	name string
	req  client.SealRequest
	want error
	msg  string
}

func (f *fixture) sealRefusals() []sealRefusal {
	reader, stranger := f.reader.Recipient().String(), f.stranger.Recipient().String()
	r := []string{reader}
	return []sealRefusal{
		{"bad name", client.SealRequest{Name: "../etc/passwd", Recipients: r}, client.ErrBadRequest, "secret name is not valid (13 bytes)"},
		{"empty name", client.SealRequest{Name: "", Recipients: r}, client.ErrBadRequest, "is not valid"},
		{"too short", client.SealRequest{Name: "x", Spec: client.Spec{Length: 4}, Recipients: r}, client.ErrBadRequest, "length 4 is outside 8..1024"},
		{"bad alphabet", client.SealRequest{Name: "x", Spec: client.Spec{Alphabet: "emoji"}, Recipients: r}, client.ErrBadRequest, "unknown alphabet (5 bytes; want alnum, hex or base64url)"},
		{"bad format", client.SealRequest{Name: "x", Spec: client.Spec{Format: "md5"}, Recipients: r}, client.ErrBadRequest, "unknown format (3 bytes; want mosquitto-pbkdf2 or bcrypt)"},
		{"bcrypt too long", client.SealRequest{Name: "x", Spec: client.Spec{Format: client.FormatBcrypt, Length: 100}, Recipients: r}, client.ErrBadRequest, "too long for bcrypt"},
		{"bad rotation", client.SealRequest{Name: "x", Spec: client.Spec{Rotation: "three-party"}, Recipients: r}, client.ErrBadRequest, "unknown rotation (11 bytes; want one-party or two-party)"},
		{"no recipients", client.SealRequest{Name: "x"}, client.ErrBadRequest, "no recipients"},
		{"not a recipient", client.SealRequest{Name: "x", Recipients: []string{"ssh-ed25519 AAAA"}}, client.ErrBadRequest, "a recipient (16 bytes) is not an age X25519 recipient"},
		{"not a node", client.SealRequest{Name: "x", Recipients: []string{stranger}}, client.ErrRefusedRecipient, "recipient " + stranger + " is not a node of the mesh"},
		{"applier not a node", client.SealRequest{Name: "two", Appliers: []string{stranger}, Recipients: r}, client.ErrRefusedRecipient, "is not a node of the mesh"},
		{"operator value not delivered", client.SealRequest{Name: "smtp", Spec: client.Spec{Operator: true}, Recipients: r}, client.ErrNotDelivered, `"smtp" is an operator's value and has not been delivered yet`},
		{"kind change mid-rotation", client.SealRequest{Name: "two", Spec: client.Spec{Rotation: client.OneParty}, Recipients: r}, client.ErrConflict, "rotation kind changes"},
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	f := &fixture{prov: vaulttest.NewNode(t), reader: vaulttest.NewNode(t), stranger: vaulttest.NewNode(t)}
	v := vaulttest.StartWith(t, vaulttest.Options{Nodes: []string{f.prov.Recipient().String(), "n2 " + f.reader.Recipient().String()}})
	f.setUp(t, ctx, v.Client)
	for _, tt := range f.cases() {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(ctx, v.Client)
			var ce *client.Error
			if !errors.Is(err, tt.want) || !errors.As(err, &ce) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
			if ce.Message != strings.ToLower(ce.Message[:1])+ce.Message[1:] {
				t.Fatalf("error %q does not start in lower case", ce.Message)
			}
		})
	}
}
