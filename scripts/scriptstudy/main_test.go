package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/codec"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

func TestKind(t *testing.T) {
	for key, want := range map[string]string{
		"bull:q:12":      "job",
		"bull:q:12:lock": "job-sub",
		"bull:q:events":  "events",
		"bull:q:wait":    "queue",
		"bull:q:id":      "queue",
		"bull:q:12:":     "job",
		"other:12":       "",
	} {
		if got := kind(key, "bull:q:"); got != want {
			t.Errorf("kind(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestFrameThenSizes frames the data field of job hashes on a real Redis
// and checks that sizes counts the frames and that they decode to the
// values written.
func TestFrameThenSizes(t *testing.T) {
	r := testutil.StartRedis(t)
	doc := strings.Repeat(`{"sku":"SKU-000123","qty":2,"price":12.5},`, 200)
	for _, cmd := range [][]string{
		{"HSET", "bull:q:1", "data", doc, "opts", "{}", "name", "export"},
		{"HSET", "bull:q:2", "data", doc, "returnvalue", `{"seq":2}`},
		{"HSET", "bull:q:3", "data", "short"},
		{"SET", "bull:q:1:lock", "token"},
		{"XADD", "bull:q:events", "*", "event", "added", "jobId", "1"},
		{"RPUSH", "bull:q:wait", "3", "2", "1"},
	} {
		if _, err := testutil.Do(r.Addr, cmd...); err != nil {
			t.Fatal(cmd, err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"frame", "--addr", r.Addr, "--prefix", "bull:q:", "--fields", "data"}, &out); err != nil {
		t.Fatal(err)
	}
	var f Framed
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if f.Hashes != 3 || f.Framed != 2 || f.LeftRaw != 1 || f.BytesAfter >= f.BytesBefore {
		t.Errorf("frame: %+v", f)
	}
	got, err := testutil.Do(r.Addr, "HGET", "bull:q:2", "data")
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := codec.NewDecoder()
	plain, err := dec.AppendDecode(nil, []byte(got))
	if err != nil || string(plain) != doc || !codec.IsFramed([]byte(got)) {
		t.Errorf("bull:q:2 data: framed %v, decodes to %d bytes (%v)", codec.IsFramed([]byte(got)), len(plain), err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"sizes", "--addr", r.Addr, "--prefix", "bull:q:"}, &out); err != nil {
		t.Fatal(err)
	}
	var s Sizes
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Groups["job"].Keys != 3 || s.Groups["job-sub"].Keys != 1 || s.Groups["events"].Keys != 1 || s.Groups["queue"].Keys != 1 {
		t.Errorf("groups: job %+v job-sub %+v events %+v queue %+v", *s.Groups["job"], *s.Groups["job-sub"], *s.Groups["events"], *s.Groups["queue"])
	}
	if d := s.Fields["data"]; d.Count != 3 || d.Framed != 2 {
		t.Errorf("data field: %+v", *d)
	}
	if rv := s.Fields["returnvalue"]; rv.Count != 1 || rv.Bytes != int64(len(`{"seq":2}`)) {
		t.Errorf("returnvalue field: %+v", *rv)
	}
	if s.UsedMemory <= 0 || s.UsedMemoryDataset <= 0 {
		t.Errorf("used_memory %d, used_memory_dataset %d", s.UsedMemory, s.UsedMemoryDataset)
	}
	var sum int64
	for _, g := range s.Groups {
		sum += g.MemoryUsage
	}
	if s.MemoryUsage != sum || sum <= 0 {
		t.Errorf("memory_usage %d, groups sum to %d", s.MemoryUsage, sum)
	}
}
