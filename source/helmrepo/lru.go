package helmrepo

import (
	"container/list"
	"sync"
)

// lru keeps values by key within a count and a size bound, dropping the
// least recently used first. A value larger than the size bound is not
// kept.
type lru[V any] struct {
	mu         sync.Mutex
	maxEntries int   // <0: unbounded count
	maxBytes   int64 // <0: keep nothing
	bytes      int64
	order      *list.List
	items      map[string]*list.Element
}

type lruEntry[V any] struct {
	key  string
	val  V
	size int64
}

func newLRU[V any](maxEntries int, maxBytes int64) *lru[V] {
	return &lru[V]{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry[V]).val, true
}

func (c *lru[V]) put(key string, v V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxBytes < 0 || c.maxEntries == 0 || size > c.maxBytes {
		return
	}
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, val: v, size: size})
	c.bytes += size
	for c.bytes > c.maxBytes || (c.maxEntries > 0 && c.order.Len() > c.maxEntries) {
		c.remove(c.order.Back())
	}
}

func (c *lru[V]) remove(el *list.Element) {
	e := el.Value.(*lruEntry[V])
	c.order.Remove(el)
	delete(c.items, e.key)
	c.bytes -= e.size
}

func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
