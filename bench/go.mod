module github.com/sluicehq/sluice/bench

go 1.26.0

require (
	github.com/sluicehq/sluice v0.0.0
	golang.org/x/sync v0.25.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.74.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/sluicehq/sluice => ../
