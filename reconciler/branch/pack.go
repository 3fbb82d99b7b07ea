package branch

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/meshgen/meshgen/internal/fsync"
)

// writePackfile writes hashes, all held by objs, as one version-2 packfile
// of whole objects into the git directory dir, with its version-2 index,
// and returns the pack's checksum (its name: pack-<sum>.pack).
//
// go-git's writer compresses every object at zlib's default level and then
// parses (inflates) the whole pack again to build the index; most of these
// objects are age ciphertext, which does not compress, and the writer knows
// every offset and CRC already. So: declarations, trees and commits are
// deflated at [zlib.BestSpeed] (already, as they were built:
// [rawObject.deflated]), sealed files are stored (zlib level 0,
// [rawObject.stored]), and the index is written from what was written.
//
// Both files are written under temporary names in objects/pack (tmp_pack_*,
// tmp_idx_*, which git ignores and `git gc` removes) and synced, then
// renamed into place, the .idx first, and the directory synced before
// returning, so a ref moved afterwards never names an object a crash could
// lose. The order is not git's (finish_tmp_packfile renames the .pack
// first): git finds packs by their .idx and skips one whose .pack is not
// there, while go-git finds packs by their .pack and fails every read on a
// pack whose .idx it cannot open, and catalog-schema and hostd read this
// repository with go-git's own listing. So no reader of either kind ever
// sees half a pack; a crash between the renames leaves an index without a
// pack, which both ignore.
func writePackfile(dir string, objs *objects, hashes []plumbing.Hash) (plumbing.Hash, error) {
	packDir := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write packfile: %w", err)
	}
	var tmps []string
	renamed := 0
	defer func() {
		for _, p := range tmps[renamed:] {
			os.Remove(p)
		}
	}()
	pack, err := os.CreateTemp(packDir, "tmp_pack_")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write packfile: %w", err)
	}
	packTmp := pack.Name()
	tmps = append(tmps, packTmp)
	sum, entries, err := encodePack(pack, objs, hashes)
	if err == nil {
		err = syncClose(pack)
	} else {
		pack.Close()
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write packfile: %w", err)
	}
	idx, err := os.CreateTemp(packDir, "tmp_idx_")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write pack index: %w", err)
	}
	tmps = []string{idx.Name(), packTmp} // in the order they are renamed
	_, err = idx.Write(encodeIndex(entries, sum))
	if err == nil {
		err = syncClose(idx)
	} else {
		idx.Close()
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write pack index: %w", err)
	}
	base := filepath.Join(packDir, "pack-"+sum.String())
	for i, final := range []string{base + ".idx", base + ".pack"} {
		if err := os.Rename(tmps[i], final); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write packfile: %w", err)
		}
		renamed++
	}
	if err := fsync.Dir(packDir); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write packfile: %w", err)
	}
	return sum, nil
}

// syncClose makes f read-only, as git leaves its packs, flushes it to disk
// and closes it.
func syncClose(f *os.File) error {
	err := f.Chmod(0o444)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// packEntry is where one object sits in a pack.
type packEntry struct {
	hash   plumbing.Hash
	offset uint64
	crc    uint32 // CRC-32 of the entry's bytes in the pack: header and zlib stream
}

// packWriter counts, checksums and CRCs what is written through it.
type packWriter struct {
	w   *bufio.Writer
	sum hash.Hash
	n   uint64
	crc uint32
}

func (p *packWriter) Write(b []byte) (int, error) {
	p.sum.Write(b)
	p.crc = crc32.Update(p.crc, crc32.IEEETable, b)
	p.n += uint64(len(b))
	return p.w.Write(b)
}

// encodePack writes the pack of hashes to w and returns its checksum and
// where each object went.
func encodePack(w io.Writer, objs *objects, hashes []plumbing.Hash) (plumbing.Hash, []packEntry, error) {
	if uint64(len(hashes)) > math.MaxUint32 {
		return plumbing.ZeroHash, nil, fmt.Errorf("%d objects do not fit one packfile", len(hashes))
	}
	pw := &packWriter{w: bufio.NewWriterSize(w, 1<<20), sum: sha1.New()}
	var hdr [12]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(hashes)))
	pw.Write(hdr[:])
	fast, err := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	store, err := zlib.NewWriterLevel(io.Discard, zlib.NoCompression)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	entries := make([]packEntry, len(hashes))
	var obuf [10]byte
	for i, h := range hashes {
		o, ok := objs.get(h)
		if !ok {
			return plumbing.ZeroHash, nil, fmt.Errorf("object %s was not built", h)
		}
		entries[i] = packEntry{hash: h, offset: pw.n}
		pw.crc = 0
		pw.Write(objectHeader(obuf[:0], o.typ, uint64(len(o.data))))
		if o.deflated != nil {
			pw.Write(o.deflated)
		} else {
			z := fast
			if o.stored {
				z = store
			}
			z.Reset(pw)
			z.Write(o.data)
			if err := z.Close(); err != nil {
				return plumbing.ZeroHash, nil, err
			}
		}
		entries[i].crc = pw.crc
	}
	var sum plumbing.Hash
	pw.sum.Sum(sum[:0])
	pw.w.Write(sum[:])
	if err := pw.w.Flush(); err != nil {
		return plumbing.ZeroHash, nil, err
	}
	return sum, entries, nil
}

// objectHeader appends a pack entry's header: the type in bits 4-6 of the
// first byte, the size in its low 4 bits and then 7 bits a byte, the high
// bit of each byte saying another follows.
func objectHeader(b []byte, typ plumbing.ObjectType, size uint64) []byte {
	c := byte(typ)<<4 | byte(size&0x0f)
	size >>= 4
	for size != 0 {
		b = append(b, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(b, c)
}

// encodeIndex returns the version-2 pack index of entries (in pack order)
// for the pack whose checksum is sum: header, fan-out table, sorted object
// names, their CRCs, their offsets (31 bits, or an index into a table of
// 64-bit offsets for those at 2 GiB and beyond), the pack's checksum and
// the index's own.
func encodeIndex(entries []packEntry, sum plumbing.Hash) []byte {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b packEntry) int { return bytes.Compare(a.hash[:], b.hash[:]) })
	n := len(sorted)
	b := make([]byte, 0, 8+256*4+n*(20+4+4)+2*20)
	b = append(b, 0xff, 't', 'O', 'c', 0, 0, 0, 2)
	var fan [256]uint32
	for _, e := range sorted {
		fan[e.hash[0]]++
	}
	var total uint32
	for _, c := range fan {
		total += c
		b = binary.BigEndian.AppendUint32(b, total)
	}
	for _, e := range sorted {
		b = append(b, e.hash[:]...)
	}
	for _, e := range sorted {
		b = binary.BigEndian.AppendUint32(b, e.crc)
	}
	var large []uint64
	for _, e := range sorted {
		if e.offset < 1<<31 {
			b = binary.BigEndian.AppendUint32(b, uint32(e.offset))
			continue
		}
		b = binary.BigEndian.AppendUint32(b, 1<<31|uint32(len(large)))
		large = append(large, e.offset)
	}
	for _, off := range large {
		b = binary.BigEndian.AppendUint64(b, off)
	}
	b = append(b, sum[:]...)
	idxSum := sha1.Sum(b)
	return append(b, idxSum[:]...)
}
