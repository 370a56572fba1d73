// Package rediscluster holds what the commands that walk every key of a
// Redis Cluster share.
package rediscluster

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Masters returns a client for each master of the cluster cc knows, in no
// particular order. Each master's SCAN returns the keys of its own slots.
func Masters(ctx context.Context, cc *redis.ClusterClient) ([]*redis.Client, error) {
	var mu sync.Mutex
	var masters []*redis.Client
	err := cc.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		masters = append(masters, node)
		mu.Unlock()
		return nil
	})
	return masters, err
}
