package bench

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/squeeze-kv/squeeze/codec"
)

// SampleRedis reads up to n values from a live Redis without changing it
// (SCAN, TYPE, GET and HGETALL only): string values, and the field values
// of hashes, each as one sample. Values squeeze already wrote (framed) are
// decoded first, so the benchmark sees the original bytes. Other types are
// skipped. Keys that vanish between SCAN and GET are skipped too.
func SampleRedis(ctx context.Context, rdb *redis.Client, n int) (Corpus, error) {
	if n <= 0 {
		return Corpus{}, fmt.Errorf("sample size %d must be positive", n)
	}
	dec, err := codec.NewDecoder()
	if err != nil {
		return Corpus{}, err
	}
	c := Corpus{Name: "redis"}
	add := func(name string, v []byte) error {
		if len(v) == 0 {
			return nil
		}
		if codec.IsFramed(v) {
			d, err := dec.AppendDecode(nil, v)
			if err != nil {
				return fmt.Errorf("key %q: decode squeeze frame: %w", name, err)
			}
			v = d
		}
		c.Samples = append(c.Samples, Sample{Name: name, Data: v})
		return nil
	}
	var cursor uint64
	scanned := 0
	for len(c.Samples) < n {
		keys, next, err := rdb.Scan(ctx, cursor, "", 100).Result()
		if err != nil {
			return Corpus{}, fmt.Errorf("SCAN: %w", err)
		}
		for _, k := range keys {
			if len(c.Samples) >= n {
				break
			}
			scanned++
			typ, err := rdb.Type(ctx, k).Result()
			if err != nil {
				return Corpus{}, fmt.Errorf("TYPE %q: %w", k, err)
			}
			switch typ {
			case "string":
				v, err := rdb.Get(ctx, k).Bytes()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					return Corpus{}, fmt.Errorf("GET %q: %w", k, err)
				}
				if err := add(k, v); err != nil {
					return Corpus{}, err
				}
			case "hash":
				m, err := rdb.HGetAll(ctx, k).Result()
				if err != nil {
					return Corpus{}, fmt.Errorf("HGETALL %q: %w", k, err)
				}
				for f, v := range m {
					if len(c.Samples) >= n {
						break
					}
					if err := add(k+"/"+f, []byte(v)); err != nil {
						return Corpus{}, err
					}
				}
			}
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	if len(c.Samples) == 0 {
		return Corpus{}, fmt.Errorf("%w: no non-empty string or hash values among %d keys", ErrEmptyCorpus, scanned)
	}
	return c, nil
}
