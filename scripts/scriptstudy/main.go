// Command scriptstudy is the Go half of scripts/study-scripts.sh (issue 22):
// it looks at the keys a BullMQ queue holds in Redis, and frames job hash
// fields by force, as "squeeze compact" would if it did not skip the
// prefixes scripts use. It talks to Redis directly, never to the proxy.
//
//	scriptstudy sizes --addr 127.0.0.1:6379 --prefix bull:study:
//	scriptstudy frame --addr 127.0.0.1:6379 --prefix bull:study: --fields data --codec s2
//
// sizes prints, as one JSON object, MEMORY USAGE summed per kind of key
// under --prefix: "job" (the job hashes, PREFIX + a number), "job-sub" (keys
// under a job, PREFIX + number + ":...", such as locks and logs), "events"
// (the events stream) and "queue" (every other key: lists and sets of job
// ids, meta, id counter), with the bytes of the job hashes' data,
// returnvalue and opts fields and how many of those fields hold a frame.
//
// frame rewrites the --fields of every job hash with --codec (the codec
// package's default minimum size and gain, as squeeze proxy writes), with
// HSET on Redis: BullMQ's scripts then meet frames where they read. It is a
// study tool, not a compaction: nothing compares and sets, so run it only on
// a queue nothing is using.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scriptstudy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: scriptstudy sizes|frame --addr HOST:PORT --prefix PREFIX [--fields data --codec s2]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "Redis address (host:port)")
	prefix := fs.String("prefix", "bull:study:", "the queue's key prefix")
	fields := fs.String("fields", "data", "frame: comma-separated job hash fields to frame")
	codecName := fs.String("codec", "s2", "frame: the codec to frame with")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	var res any
	var err error
	switch args[0] {
	case "sizes":
		res, err = sizes(ctx, rdb, *prefix)
	case "frame":
		var alg codec.Algorithm
		if alg, err = codec.ParseAlgorithm(*codecName); err != nil {
			return err
		}
		res, err = frame(ctx, rdb, *prefix, strings.Split(*fields, ","), alg)
	default:
		return fmt.Errorf("unknown command %q (sizes, frame)", args[0])
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(res)
}

// kind classifies a key under prefix: job, job-sub, events or queue.
func kind(key, prefix string) string {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return ""
	}
	id, sub, hasSub := strings.Cut(rest, ":")
	if id != "" && strings.Trim(id, "0123456789") == "" {
		if hasSub && sub != "" {
			return "job-sub"
		}
		return "job"
	}
	if rest == "events" {
		return "events"
	}
	return "queue"
}

// Group is what sizes reports for one kind of key.
type Group struct {
	Keys        int   `json:"keys"`
	MemoryUsage int64 `json:"memory_usage"`
}

// Field is what sizes reports for one job hash field.
type Field struct {
	Count  int   `json:"count"`
	Bytes  int64 `json:"bytes"`
	Framed int   `json:"framed"`
}

// Sizes is the sizes report.
type Sizes struct {
	Groups map[string]*Group `json:"groups"`
	Fields map[string]*Field `json:"fields"`
	// MemoryUsage is the sum of the groups' MEMORY USAGE: the queue's keys.
	MemoryUsage int64 `json:"memory_usage"`
	// INFO memory's used_memory, used_memory_dataset, used_memory_scripts
	// (the script cache) and mem_clients_normal (client buffers) when the
	// keys were read.
	UsedMemory        int64 `json:"used_memory"`
	UsedMemoryDataset int64 `json:"used_memory_dataset"`
	UsedMemoryScripts int64 `json:"used_memory_scripts"`
	MemClientsNormal  int64 `json:"mem_clients_normal"`
}

// scanKeys returns every key under prefix (SCAN, bounded by what exists).
func scanKeys(ctx context.Context, rdb *redis.Client, prefix string) ([]string, error) {
	var keys []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

func sizes(ctx context.Context, rdb *redis.Client, prefix string) (*Sizes, error) {
	keys, err := scanKeys(ctx, rdb, prefix)
	if err != nil {
		return nil, err
	}
	s := &Sizes{Groups: map[string]*Group{}, Fields: map[string]*Field{}}
	for _, k := range []string{"job", "job-sub", "events", "queue"} {
		s.Groups[k] = &Group{}
	}
	for _, f := range []string{"data", "returnvalue", "opts"} {
		s.Fields[f] = &Field{}
	}
	for _, k := range keys {
		g := s.Groups[kind(k, prefix)]
		mu, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err == redis.Nil {
			continue // gone since SCAN
		}
		if err != nil {
			return nil, fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		g.Keys++
		g.MemoryUsage += mu
		s.MemoryUsage += mu
		if kind(k, prefix) != "job" {
			continue
		}
		if t, err := rdb.Type(ctx, k).Result(); err != nil || t != "hash" {
			continue
		}
		for name, f := range s.Fields {
			v, err := rdb.HGet(ctx, k, name).Result()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				return nil, err
			}
			f.Count++
			f.Bytes += int64(len(v))
			if codec.IsFramed([]byte(v)) {
				f.Framed++
			}
		}
	}
	info, err := rdb.InfoMap(ctx, "memory").Result()
	if err != nil {
		return nil, err
	}
	fmt.Sscan(info["Memory"]["used_memory"], &s.UsedMemory)
	fmt.Sscan(info["Memory"]["used_memory_dataset"], &s.UsedMemoryDataset)
	fmt.Sscan(info["Memory"]["used_memory_scripts"], &s.UsedMemoryScripts)
	fmt.Sscan(info["Memory"]["mem_clients_normal"], &s.MemClientsNormal)
	return s, nil
}

// Framed is the frame report.
type Framed struct {
	Hashes      int   `json:"hashes"`
	Framed      int   `json:"framed"`
	LeftRaw     int   `json:"left_raw"`
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
}

func frame(ctx context.Context, rdb *redis.Client, prefix string, fields []string, alg codec.Algorithm) (*Framed, error) {
	enc, err := codec.NewEncoder(alg)
	if err != nil {
		return nil, err
	}
	keys, err := scanKeys(ctx, rdb, prefix)
	if err != nil {
		return nil, err
	}
	r := &Framed{}
	for _, k := range keys {
		if kind(k, prefix) != "job" {
			continue
		}
		if t, err := rdb.Type(ctx, k).Result(); err != nil || t != "hash" {
			continue
		}
		r.Hashes++
		for _, f := range fields {
			v, err := rdb.HGet(ctx, k, f).Bytes()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				return nil, err
			}
			if codec.IsFramed(v) {
				continue
			}
			fr, outcome := enc.AppendEncodeOutcome(nil, v)
			r.BytesBefore += int64(len(v))
			if outcome != codec.Compressed {
				r.LeftRaw++
				r.BytesAfter += int64(len(v))
				continue
			}
			if err := rdb.HSet(ctx, k, f, fr).Err(); err != nil {
				return nil, err
			}
			r.Framed++
			r.BytesAfter += int64(len(fr))
		}
	}
	return r, nil
}
