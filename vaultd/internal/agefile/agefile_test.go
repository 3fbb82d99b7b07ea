package agefile

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/cryptotest"

	"filippo.io/age"

	"github.com/meshgen/meshgen/vaultd/internal/x25519"
)

// fixedRecipient wraps to stanzas of fixed bodies: headers of every shape
// (several stanzas, bodies of whole lines) that an X25519 recipient never
// makes.
type fixedRecipient struct{ stanzas []*age.Stanza }

func (f fixedRecipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	out := make([]*age.Stanza, len(f.stanzas))
	for i, s := range f.stanzas {
		c := *s
		c.Body = append(bytes.Clone(s.Body), fileKey...)
		out[i] = &c
	}
	return out, nil
}

// TestSealAndWriterAreAgeEncrypt: Seal, and a Writer written in pieces of
// every size, write byte for byte what age.Encrypt writes given the same
// randomness, for the recipients vaultd seals to (its own X25519 and
// age's), for stanzas of every shape, and for plaintexts of every size
// around age's 64 KiB chunks; and age decrypts them.
func TestSealAndWriterAreAgeEncrypt(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := x25519.Parse(id.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte{0xa5}, 2*bodyBytesPerLine)
	recipients := []struct {
		name string
		r    age.Recipient
		id   age.Identity
	}{
		{"vaultd's X25519", ours, id},
		{"age's X25519", id.Recipient(), id},
		{"stanzas of whole lines", fixedRecipient{[]*age.Stanza{
			{Type: "one", Args: []string{"a", "b!"}, Body: line[:bodyBytesPerLine-fileKeySize]},
			{Type: "two", Body: line[:2*bodyBytesPerLine-fileKeySize]},
			{Type: "three", Args: []string{"~"}, Body: line[:bodyBytesPerLine-fileKeySize-1]},
			{Type: "four", Body: line[:bodyBytesPerLine-fileKeySize+1]},
			{Type: "five"},
		}}, nil},
	}
	sizes := []int{0, 1, 31, 32, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2 * ChunkSize, 3*ChunkSize + 5}
	for _, rc := range recipients {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d bytes", rc.name, size), func(t *testing.T) {
				plain := bytes.Repeat([]byte("v"), size)
				seed := uint64(size) + 1
				cryptotest.SetGlobalRandom(t, seed)
				var want bytes.Buffer
				w, err := age.Encrypt(&want, rc.r)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(plain); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				cryptotest.SetGlobalRandom(t, seed)
				got, err := Seal(rc.r, plain)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("Seal wrote %d bytes unlike age.Encrypt's %d:\n%q\nage:\n%q", len(got), want.Len(), got[:min(len(got), 400)], want.Bytes()[:min(want.Len(), 400)])
				}
				if cap(got) != len(got) {
					t.Errorf("Seal's buffer was sized %d for %d bytes", cap(got), len(got))
				}
				for i, piece := range []int{1, 7, 1000, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3 * ChunkSize} {
					cryptotest.SetGlobalRandom(t, seed)
					var out countingWriter
					// The size hint is right, too small or too large.
					w, err := NewWriter(&out, rc.r, []int{size, 0, size / 3, 2*size + 100}[i%4])
					if err != nil {
						t.Fatal(err)
					}
					for rest := plain; len(rest) > 0; rest = rest[min(piece, len(rest)):] {
						if n, err := w.Write(rest[:min(piece, len(rest))]); err != nil || n != min(piece, len(rest)) {
							t.Fatalf("Write: %d, %v", n, err)
						}
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(out.Bytes(), want.Bytes()) {
						t.Fatalf("a Writer written %d bytes at a time wrote %d bytes unlike age.Encrypt's %d", piece, out.Len(), want.Len())
					}
					if chunks := max(1, (size+ChunkSize-1)/ChunkSize); out.writes != 1+chunks {
						t.Errorf("a Writer wrote %d bytes in %d writes, not the header and %d chunks", size, out.writes, chunks)
					}
					if _, err := w.Write([]byte("x")); err == nil {
						t.Error("a closed Writer took a write")
					}
				}
				if rc.id == nil {
					return
				}
				rd, err := age.Decrypt(bytes.NewReader(got), rc.id)
				if err != nil {
					t.Fatal(err)
				}
				back, err := io.ReadAll(rd)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(back, plain) {
					t.Fatal("age decrypted another value")
				}
			})
		}
	}
}

// countingWriter counts the writes it holds.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// TestSealRefusesBadStanzas: a stanza age would not write is refused, as
// age.Encrypt refuses it, by Seal and NewWriter.
func TestSealRefusesBadStanzas(t *testing.T) {
	for _, s := range []*age.Stanza{
		{Type: ""},
		{Type: "has space"},
		{Type: "ok", Args: []string{""}},
		{Type: "ok", Args: []string{"new\nline"}},
		{Type: "ok", Args: []string{"é"}},
	} {
		r := fixedRecipient{[]*age.Stanza{s}}
		if _, err := age.Encrypt(io.Discard, r); err == nil {
			t.Fatalf("age.Encrypt took stanza %q %q", s.Type, s.Args)
		}
		if _, err := Seal(r, []byte("v")); err == nil {
			t.Errorf("Seal took stanza %q %q", s.Type, s.Args)
		}
		if _, err := NewWriter(io.Discard, r, 1); err == nil {
			t.Errorf("NewWriter took stanza %q %q", s.Type, s.Args)
		}
	}
}
