package testenv

import "sync"

// Parallel calls fn for every i in [0, n) on the given number of
// goroutines, and returns when all calls have returned. Benchmarks use it
// to load the API server the way a controller's workers do.
func Parallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
