package bench

import (
	"io"
	"testing"
)

// TestTargets checks that every implementation's adapter does the same thing, on a
// small scale, so the benchmarks compare equal work.
func TestTargets(t *testing.T) {
	for _, im := range Impls() {
		t.Run(im.Name, func(t *testing.T) {
			tg := im.New()
			if err := tg.Mkdir("files"); err != nil {
				t.Fatal(err)
			}
			for _, n := range fileNames[:3] {
				if err := writeOne(tg, n, fileData); err != nil {
					t.Fatal(err)
				}
			}
			// Create truncates.
			if err := writeOne(tg, fileNames[0], fileData[:10]); err != nil {
				t.Fatal(err)
			}
			if size, err := tg.Stat(fileNames[0]); err != nil || size != 10 {
				t.Fatalf("stat after truncating create: %d, %v", size, err)
			}
			r, err := tg.Open(fileNames[1])
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil || len(got) != FileSize || got[100] != fileData[100] {
				t.Fatalf("read back %d bytes, %v", len(got), err)
			}
			r.Close()
			if n, err := tg.ReadDir("files"); err != nil || n != 3 {
				t.Fatalf("readdir: %d, %v", n, err)
			}
			for i := 0; i < 2; i++ {
				w, err := tg.Append("log")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(appendData[:100]); err != nil {
					t.Fatal(err)
				}
				w.Close()
			}
			if size, err := tg.Stat("log"); err != nil || size != 200 {
				t.Fatalf("appended size %d, %v", size, err)
			}
			for _, d := range deepDirs {
				if err := tg.Mkdir(d); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeOne(tg, deepFile, fileData[:7]); err != nil {
				t.Fatal(err)
			}
			if size, err := tg.Stat(deepFile); err != nil || size != 7 {
				t.Fatalf("deep stat %d, %v", size, err)
			}
			if _, err := tg.Stat("files/missing"); err == nil {
				t.Fatal("stat of a missing file succeeded")
			}
		})
	}
}
