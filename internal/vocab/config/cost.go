package config

import "fmt"

// Cost is the `cost:` section: what the repository's serving fleet costs,
// so a regression verdict can say what it costs a month. Unset (the
// default) shows no money at all; set, it needs the price of a GPU-hour
// and the fleet's size, as GPUs running all month or as GPU-hours a month.
type Cost struct {
	GPUHourUSD      float64 `yaml:"gpu_hour_usd"`
	GPUs            int     `yaml:"gpus"`
	MonthlyGPUHours float64 `yaml:"monthly_gpu_hours"`
}

// Set reports whether the repository declared a price.
func (c Cost) Set() bool { return c.GPUHourUSD > 0 }

// Bounds that catch a slip of the keyboard (cents for dollars, an hour
// count for a GPU count), not a real fleet.
const (
	maxGPUHourUSD      = 1000
	maxGPUs            = 1_000_000
	maxMonthlyGPUHours = maxGPUs * 744
)

func (d *decoder) validateCost(c Cost) {
	if !d.set["cost"] {
		return
	}
	switch {
	case c.GPUHourUSD <= 0:
		d.errField("cost.gpu_hour_usd", "no price of a GPU-hour", "set cost.gpu_hour_usd in dollars, e.g. 4.10 for an A100-80G on demand; or remove cost: to show no money")
	case c.GPUHourUSD > maxGPUHourUSD:
		d.errField("cost.gpu_hour_usd", fmt.Sprintf("$%g per GPU-hour", c.GPUHourUSD), fmt.Sprintf("the price of one GPU for one hour, in dollars, at most %d", maxGPUHourUSD))
	}
	gpus, hours := d.set["cost.gpus"], d.set["cost.monthly_gpu_hours"]
	switch {
	case gpus && hours:
		d.errField("cost.monthly_gpu_hours", "both gpus and monthly_gpu_hours are set", "keep one: gpus (running all month) or monthly_gpu_hours")
	case !gpus && !hours:
		d.errField("cost", "no fleet size", "set cost.gpus (GPUs serving all month) or cost.monthly_gpu_hours")
	case gpus && (c.GPUs < 1 || c.GPUs > maxGPUs):
		d.errField("cost.gpus", fmt.Sprintf("%d GPUs", c.GPUs), fmt.Sprintf("the GPUs serving this engine, 1 to %d", maxGPUs))
	case hours && (c.MonthlyGPUHours <= 0 || c.MonthlyGPUHours > maxMonthlyGPUHours):
		d.errField("cost.monthly_gpu_hours", fmt.Sprintf("%g GPU-hours a month", c.MonthlyGPUHours), "a positive number of GPU-hours, e.g. 7300 for 10 GPUs all month")
	}
}
