package bench

// Workload names of the Redis study (seed 000).
const (
	WorkloadRead      = "read"      // N GETs of one stored value
	WorkloadWrite     = "write"     // N SETs
	WorkloadReadWrite = "readwrite" // N times: one SET, then one GET
)

// Paths of the Redis study.
const (
	PathDirect  = "direct"  // go-redis, no squeeze at all
	PathLibrary = "library" // squeeze's codec in-process around go-redis
	PathProxy   = "proxy"   // through the squeeze proxy
)

// RedisRow is one measured cell of "squeeze bench redis": a path, codec,
// workload, value size and iteration count.
type RedisRow struct {
	Path       string `json:"path"`
	Codec      string `json:"codec"`
	Workload   string `json:"workload"`
	SizeBytes  int    `json:"size_bytes"`
	Iterations int    `json:"iterations"`
	Repeats    int    `json:"repeats"`
	// TotalMs is the median over the repeats of the time for all iterations.
	TotalMs float64 `json:"total_ms"`
	// NsPerOp is TotalMs divided by the iterations, in nanoseconds.
	NsPerOp float64 `json:"ns_per_op"`
	// SlowdownPct compares NsPerOp with codec "none" on the same path,
	// workload, size and iterations: +50 means 1.5 times the time. It is 0
	// when NoBaseline is set.
	SlowdownPct float64 `json:"slowdown_pct"`
	// NoBaseline is set when codec "none" was not measured at this path,
	// workload, size and iteration count (its cell was skipped by the time
	// budget), so SlowdownPct could not be computed.
	NoBaseline bool `json:"no_baseline,omitempty"`
	// MemorySavedPct is the share of Redis memory (MEMORY USAGE of the key)
	// this codec saves against storing the value raw.
	MemorySavedPct float64 `json:"memory_saved_pct"`
}

// MemoryRow is the memory Redis uses for values of one size stored with one
// codec.
type MemoryRow struct {
	Codec     string `json:"codec"`
	SizeBytes int    `json:"size_bytes"`
	// Keys is how many keys were written (enough to store about 1 MB, so
	// that the used_memory deltas rise above the allocator's noise);
	// MEMORY USAGE is read on each.
	Keys int `json:"keys"`
	// StoredBytes is the length of the value as squeeze writes it.
	StoredBytes int `json:"stored_bytes"`
	// WrittenWith is set on rows measured at rest (RedisOptions.CompactTo):
	// the codec the keys were written with before compaction to Codec's
	// target; Rewritten is how many of the Keys compaction rewrote.
	WrittenWith string `json:"written_with,omitempty"`
	Rewritten   int    `json:"rewritten,omitempty"`
	// MemoryUsageBytes is MEMORY USAGE of one key (averaged over Keys).
	MemoryUsageBytes float64 `json:"memory_usage_bytes"`
	// UsedMemoryDeltaBytes is what deleting the Keys keys freed of INFO
	// used_memory, per key (see measureKeys: what stays allocated once
	// they are gone is not theirs).
	UsedMemoryDeltaBytes float64 `json:"used_memory_delta_bytes"`
	// DatasetDeltaBytes is the same for INFO used_memory_dataset, which
	// leaves out client buffers and other overhead (less noisy).
	DatasetDeltaBytes float64 `json:"dataset_delta_bytes"`
	// SavedPct is MEMORY USAGE saved against codec none; UsedMemorySavedPct
	// and DatasetSavedPct the same from the deltas.
	SavedPct           float64 `json:"memory_saved_pct"`
	UsedMemorySavedPct float64 `json:"used_memory_saved_pct"`
	DatasetSavedPct    float64 `json:"dataset_saved_pct"`
}

// DocRow is one measured cell of "squeeze bench docs".
type DocRow struct {
	Codec string `json:"codec"`
	// Link names the network between the application and Redis; rows
	// through the proxy add " via proxy" to it, so that tables, charts and
	// crossovers keep the two paths apart.
	Link string `json:"link"`
	// Path is "library" (the application compresses: compress + SET, GET +
	// decompress) or "proxy" (the application sends plain SET and GET to
	// an in-process squeeze proxy on loopback, which compresses and talks
	// to Redis over the link).
	Path         string  `json:"path"`
	SizeBytes    int     `json:"size_bytes"`
	StoredBytes  int     `json:"stored_bytes"`
	Repeats      int     `json:"repeats"`
	UploadMs     float64 `json:"upload_ms"`   // median of compress + SET
	DownloadMs   float64 `json:"download_ms"` // median of GET + decompress
	UploadPct    float64 `json:"upload_change_pct"`
	DownloadPct  float64 `json:"download_change_pct"`
	SavedPct     float64 `json:"saved_pct"`
	CompressMs   float64 `json:"compress_ms"`
	DecompressMs float64 `json:"decompress_ms"`
}

// Crossover is the document size from which a codec makes transfers faster
// than no compression on one link.
type Crossover struct {
	Codec     string `json:"codec"`
	Link      string `json:"link"`
	Direction string `json:"direction"` // "upload" or "download"
	// SizeBytes is the smallest measured size from which the codec is
	// faster at every larger measured size; -1 when it never is.
	SizeBytes int `json:"size_bytes"`
}

// SeedSlowdown is one figure from seed 000 (Ruby, zlib, 2013): the slowdown
// the article reported for one workload and file size.
type SeedSlowdown struct {
	Workload    string  `json:"workload"`
	SizeBytes   int     `json:"size_bytes"`
	SlowdownPct float64 `json:"slowdown_pct"`
}

// SeedSlowdowns are the slowdowns seed 000 reported for zlib in Ruby,
// shown beside the measured ones in the report.
var SeedSlowdowns = []SeedSlowdown{
	{WorkloadRead, 0, 6}, {WorkloadRead, 16600, 26}, {WorkloadRead, 47500, 47.5}, {WorkloadRead, 221900, 55}, {WorkloadRead, 4200000, 33.5},
	{WorkloadWrite, 0, 29}, {WorkloadWrite, 16600, 161}, {WorkloadWrite, 47500, 520}, {WorkloadWrite, 221900, 1063}, {WorkloadWrite, 4200000, 675},
	{WorkloadReadWrite, 0, 19.8}, {WorkloadReadWrite, 16600, 104}, {WorkloadReadWrite, 47500, 350}, {WorkloadReadWrite, 221900, 667}, {WorkloadReadWrite, 4200000, 402},
}

// SeedMemorySavedPct is the memory gain seed 000 reported for zlib on text
// (75-85%), as a range.
var SeedMemorySavedPct = [2]float64{75, 85}
