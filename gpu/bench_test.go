package gpu

import (
	"testing"

	"github.com/kvstore/kvstore/format"
)

// Benchmarks of the kernels on the CPU device and, when Open finds one, on
// the CUDA device: go test -run '^$' -bench . ./gpu. SetBytes counts the
// bytes a launch reads and writes.

var benchSize = reportSize{heads: 8, headDim: 128, spans: 8, spanRows: 128, rank: 32, blockSize: 16}

func benchDevices(b *testing.B) map[string]Device {
	devs := map[string]Device{"cpu": CPU()}
	if d, err := Open(); err == nil {
		b.Cleanup(func() { d.Close() })
		devs["cuda"] = d
	}
	return devs
}

func BenchmarkReconstruct(b *testing.B) {
	for name, dev := range benchDevices(b) {
		for _, kind := range layoutKind {
			b.Run(name+"/"+kind.String(), func(b *testing.B) {
				s, err := dev.NewStream()
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				sc := buildReconScene(b, dev, s, benchSize, kind, format.DTypeBF16)
				b.SetBytes(int64(sc.traffic))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := s.Reconstruct(&sc.launch); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Synchronize(); err != nil { // inside the timing: launches are asynchronous
					b.Fatal(err)
				}
			})
		}
	}
}

func BenchmarkShift(b *testing.B) {
	for name, dev := range benchDevices(b) {
		b.Run(name, func(b *testing.B) {
			s, err := dev.NewStream()
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			dt := format.DTypeBF16
			tokens := benchSize.spans * benchSize.spanRows
			rope := mustRoPE(b, format.RoPE{Style: format.RoPERotateHalf, Theta: 500000}, benchSize.headDim)
			lay := Layout{Kind: LayoutHND, DType: dt, Heads: benchSize.heads, HeadDim: benchSize.headDim, Tokens: tokens}
			src := make([]byte, lay.Bytes())
			l := ShiftLaunch{Layout: lay, Src: upload(b, dev, s, src), SrcDType: dt, Tokens: tokens,
				CosSin: upload(b, dev, s, appendF32(nil, ShiftTable(rope, 77))), Rotary: rope.Rotary(), Style: format.RoPERotateHalf}
			if l.Dst, err = dev.Alloc(lay.Bytes()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(2 * len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := s.Shift(&l); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Synchronize(); err != nil { // inside the timing: launches are asynchronous
				b.Fatal(err)
			}
		})
	}
}
