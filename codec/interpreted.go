package codec

// hllMagic begins every HyperLogLog Redis stores (its string encoding:
// "HYLL", then the dense or sparse registers).
const hllMagic = "HYLL"

// ServerInterpreted reports whether Redis itself interprets b's bytes as a
// structure of its own: a HyperLogLog, which is a string beginning with
// "HYLL" that PFADD, PFCOUNT and PFMERGE read and write. Copying one with
// GET and SET (or DUMP-free backups) is a documented Redis pattern, so the
// write policy stores such values raw: as a frame, Redis would answer
// WRONGTYPE to every PF* command, and a corrupt HyperLogLog would no longer
// get Redis's own INVALIDOBJ error.
func ServerInterpreted(b []byte) bool {
	return len(b) >= len(hllMagic) && string(b[:len(hllMagic)]) == hllMagic
}
