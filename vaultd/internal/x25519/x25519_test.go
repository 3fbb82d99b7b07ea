package x25519

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/curve25519"
)

func encrypt(t testing.TB, r age.Recipient, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAgeOpensIt seals to many real age recipients and opens each with
// age's own identity: the stanza is age's, byte for byte in form.
func TestAgeOpensIt(t *testing.T) {
	other, _ := age.GenerateX25519Identity()
	for i := range 200 {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Parse(id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		plain := bytes.Repeat([]byte{byte(i)}, i+1)
		ct := encrypt(t, r, plain)
		rd, err := age.Decrypt(bytes.NewReader(ct), id)
		if err != nil {
			t.Fatalf("age cannot open what was sealed to %s: %v", id.Recipient(), err)
		}
		got, err := io.ReadAll(rd)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("opened %d bytes, want %d: %v", len(got), len(plain), err)
		}
		var nomatch *age.NoIdentityMatchError
		if _, err := age.Decrypt(bytes.NewReader(ct), other); !errors.As(err, &nomatch) {
			t.Fatalf("another identity: %v, want no identity match", err)
		}
		// The header has the shape age writes: one X25519 stanza with a
		// 32-byte share (43 base64 characters) and a 32-byte body.
		hdr := string(ct[:bytes.Index(ct, []byte("\n---"))])
		lines := strings.Split(hdr, "\n")
		if len(lines) != 3 || lines[0] != "age-encryption.org/v1" || !strings.HasPrefix(lines[1], "-> X25519 ") || len(lines[1]) != len("-> X25519 ")+43 || len(lines[2]) != 43 {
			t.Fatalf("header %q is not age's X25519 stanza", hdr)
		}
	}
}

// TestMultiplicationsAreX25519 checks the two scalar multiplications a wrap
// makes against curve25519.X25519: RFC 7748's test vectors, scalars at the
// edges of clamping, and random scalars and points.
func TestMultiplicationsAreX25519(t *testing.T) {
	vectors := []struct{ scalar, point, want string }{
		// RFC 7748, section 5.2.
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4", "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c", "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d", "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493", "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
		// RFC 7748, section 6.1: both parties' public keys.
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "0900000000000000000000000000000000000000000000000000000000000000", "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"},
		{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", "0900000000000000000000000000000000000000000000000000000000000000", "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"},
	}
	for _, v := range vectors {
		e, point, want := hex32(t, v.scalar), hex32(t, v.point), hex32(t, v.want)
		if got := scalarMult(&e, &point); got != want {
			t.Errorf("scalarMult(%s, %s) = %x, want %s", v.scalar, v.point, got, v.want)
		}
		if point[0] == 9 {
			got, err := basepointMult(&e)
			if err != nil || got != want {
				t.Errorf("basepointMult(%s) = %x, %v, want %s", v.scalar, got, err, v.want)
			}
		}
	}

	scalars := [][32]byte{{}, {0: 8}, {31: 0xff}}
	var ones [32]byte
	for i := range ones {
		ones[i] = 0xff
	}
	scalars = append(scalars, ones)
	for range 200 {
		var e [32]byte
		rand.Read(e[:])
		scalars = append(scalars, e)
	}
	for i, e := range scalars {
		base, err := curve25519.X25519(e[:], curve25519.Basepoint)
		if err != nil {
			t.Fatal(err)
		}
		got, err := basepointMult(&e)
		if err != nil || !bytes.Equal(got[:], base) {
			t.Fatalf("basepointMult(%x) = %x, %v, want %x", e, got, err, base)
		}
		var point [32]byte
		rand.Read(point[:])
		point[31] &= 127
		if i%2 == 0 {
			// A real public key, as every recipient is.
			copy(point[:], base)
			point = scalarMultRef(t, scalars[(i+1)%len(scalars)], point)
		}
		want, err := curve25519.X25519(e[:], point[:])
		if err != nil {
			continue // a low-order point, refused below
		}
		if got := scalarMult(&e, &point); !bytes.Equal(got[:], want) {
			t.Fatalf("scalarMult(%x, %x) = %x, want %x", e, point, got, want)
		}
	}
}

func scalarMultRef(t *testing.T, e, point [32]byte) [32]byte {
	t.Helper()
	out, err := curve25519.X25519(e[:], point[:])
	if err != nil {
		t.Fatal(err)
	}
	return [32]byte(out)
}

func hex32(t *testing.T, s string) [32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad test vector %q", s)
	}
	return [32]byte(b)
}

// TestWrapRefusesLowOrderRecipients: a recipient of small order would make
// an all-zero shared secret, which age refuses to use; so does Wrap.
func TestWrapRefusesLowOrderRecipients(t *testing.T) {
	lowOrder := []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
		"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	}
	for _, s := range lowOrder {
		r := &Recipient{their: hex32(t, s)}
		if _, err := r.Wrap(make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "low-order") {
			t.Errorf("Wrap to %s: %v, want a low-order refusal", s, err)
		}
	}
}

// TestParseRefusesWhatAgeRefuses: every string age refuses is refused, and
// a string age takes decodes to the key age uses.
func TestParseRefusesWhatAgeRefuses(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	good := id.Recipient().String()
	flip := []byte(good)
	flip[10] = map[bool]byte{true: 'q', false: 'p'}[flip[10] != 'q']
	for _, s := range []string{
		"",
		"age1",
		strings.ToUpper(good),
		good[:len(good)-1],
		string(flip),
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEiG",
		"AGE-SECRET-KEY-1" + strings.Repeat("Q", 58),
		good + "q",
	} {
		_, ageErr := age.ParseX25519Recipient(s)
		if _, err := Parse(s); (err == nil) != (ageErr == nil) || err == nil {
			t.Errorf("Parse(%q): %v, age says %v; want refused", s, err, ageErr)
		}
	}
	r, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	// The identity's own public key is the one decoded.
	sk, err := age.ParseX25519Identity(id.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := age.Decrypt(bytes.NewReader(encrypt(t, r, []byte("x"))), sk); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeBech32(t *testing.T) {
	for _, tt := range []struct {
		in, hrp string
		data    []byte
		err     string
	}{
		// BIP 173's valid test vectors.
		{in: "a12uel5l", hrp: "a", data: []byte{}},
		{in: "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw", hrp: "abcdef", data: []byte{0x00, 0x44, 0x32, 0x14, 0xc7, 0x42, 0x54, 0xb6, 0x35, 0xcf, 0x84, 0x65, 0x3a, 0x56, 0xd7, 0xc6, 0x75, 0xbe, 0x77, 0xdf}},
		{in: "a12uel5m", err: "invalid checksum"},
		{in: "pzry9x0s0muk", err: "no separator"},
		{in: "A12UEL5L", err: "not lower case"},
		{in: "a1b2uel5l", err: "invalid character"},
	} {
		hrp, data, err := decodeBech32(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: %v, want %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || hrp != tt.hrp || !bytes.Equal(data, tt.data) {
			t.Errorf("%s: %q %x %v, want %q %x", tt.in, hrp, data, err, tt.hrp, tt.data)
		}
	}
}

// BenchmarkWrap compares age's X25519 recipient with this one: the time to
// seal one small value. "x25519-once" is a recipient used once (the
// ladder), "x25519-table" one used again (its table built).
func BenchmarkWrap(b *testing.B) {
	id, _ := age.GenerateX25519Identity()
	ours, err := Parse(id.Recipient().String())
	if err != nil {
		b.Fatal(err)
	}
	withTable, err := Parse(id.Recipient().String())
	if err != nil {
		b.Fatal(err)
	}
	encrypt(b, withTable, nil)
	encrypt(b, withTable, nil)
	if withTable.comb.Load() == nil {
		b.Fatal("no table after two wraps")
	}
	for _, bb := range []struct {
		name string
		r    func() age.Recipient
	}{
		{"age", func() age.Recipient { return id.Recipient() }},
		{"x25519-once", func() age.Recipient { return &Recipient{their: ours.their} }},
		{"x25519-table", func() age.Recipient { return withTable }},
	} {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				encrypt(b, bb.r(), []byte("a value of 32 characters, say..."))
			}
		})
	}
}

// FuzzParse: Parse takes exactly what age takes, and what it takes it
// reads as the 32-byte key age's own bech32 holds (checked by encoding it
// back with age's recipient of the same key).
func FuzzParse(f *testing.F) {
	for range 4 {
		id, _ := age.GenerateX25519Identity()
		f.Add(id.Recipient().String())
	}
	f.Add("age1")
	f.Add("age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq")
	f.Fuzz(func(t *testing.T, s string) {
		ar, ageErr := age.ParseX25519Recipient(s)
		r, err := Parse(s)
		if (err == nil) != (ageErr == nil) {
			t.Fatalf("Parse(%q): %v, age: %v", s, err, ageErr)
		}
		if err != nil {
			return
		}
		back, err := age.ParseX25519Recipient(encodeAge(t, r.their[:]))
		if err != nil || back.String() != ar.String() {
			t.Fatalf("Parse(%q) read another key: %v", s, err)
		}
	})
}

// encodeAge writes a 32-byte key as an "age1..." recipient (bech32), the
// test's own encoder to check decodeBech32 against.
func encodeAge(t *testing.T, key []byte) string {
	t.Helper()
	var values []byte
	acc, bits := uint32(0), uint(0)
	for _, b := range key {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			values = append(values, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		values = append(values, byte(acc<<(5-bits))&31)
	}
	hrp := "age"
	var pre []byte
	for i := 0; i < len(hrp); i++ {
		pre = append(pre, hrp[i]>>5)
	}
	pre = append(pre, 0)
	for i := 0; i < len(hrp); i++ {
		pre = append(pre, hrp[i]&31)
	}
	mod := polymod(append(append(pre, values...), 0, 0, 0, 0, 0, 0)) ^ 1
	out := hrp + "1"
	for _, v := range values {
		out += string(charset[v])
	}
	for p := range 6 {
		out += string(charset[byte(mod>>(5*(5-p)))&31])
	}
	return out
}
