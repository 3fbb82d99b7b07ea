package vaultd

import (
	"testing"

	"filippo.io/age"
)

// TestRecipientCache parses through the cache: a recipient parses to the
// same key every time, one that does not parse is refused every time and
// not remembered, and the cache stops growing at its bound.
func TestRecipientCache(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	var c recipientCache
	a, err := c.parse(id.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.parse(id.Recipient().String())
	if err != nil || a != b || c.n.Load() != 1 {
		t.Fatalf("parsing a recipient twice: %p %p %v (%d remembered), want the same key once", a, b, err, c.n.Load())
	}
	for _, bad := range []string{"", "age1", id.String(), id.Recipient().String() + "x"} {
		for range 2 {
			if p, err := c.parse(bad); err == nil || p != nil {
				t.Fatalf("parse(%d bytes): %v %v, want a refusal", len(bad), p, err)
			}
		}
	}
	if c.n.Load() != 1 {
		t.Fatalf("%d remembered after refusals, want 1", c.n.Load())
	}
	c.n.Store(maxParsedRecipients)
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.parse(other.Recipient().String()); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.m.Load(other.Recipient().String()); ok || c.n.Load() != maxParsedRecipients {
		t.Fatal("a full cache remembered another recipient")
	}
}
