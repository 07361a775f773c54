package learners

import "fmt"

// Summand is a learner that can be one part of an additive model: a
// prediction from the sum of several parts' margins (a shared part learned
// from every key's labels and a key's own part, as in feature augmentation,
// Daumé 2007, or hashed multitask learning, Weinberger et al. 2009).
//
// LearnSum absorbs the label y (−1 or +1) of x as the learner's Learn would
// if its own margin on x were sum, the margin of the whole model: a
// mistake-driven learner updates when y·sum ≤ 0, a loss-driven one takes
// its step at sum. On error the state is untouched.
//
// QueryProbAt is the probability with which the learner's query rule asks
// for a label when the model's margin is m (1 for learners without one): a
// sampler that is one part of a sum asks by the whole model's margin. Set
// it as a Prediction's QueryProb before Decide, which draws as it always
// does.
type Summand interface {
	Learner
	LearnSum(x Vector, y int, sum float64) error
	QueryProbAt(m float64) float64
}

// checkSum validates LearnSum's arguments.
func checkSum(l Learner, x Vector, y int, sum float64) error {
	if err := checkDim(x, l.Dim()); err != nil {
		return err
	}
	if err := checkLabel(y); err != nil {
		return err
	}
	if err := checkMargin(sum); err != nil {
		return fmt.Errorf("the sum's margin: %w", err)
	}
	return nil
}

// LearnSum updates as the Perceptron does on a mistake of the sum.
func (l *perceptron) LearnSum(x Vector, y int, sum float64) error {
	if err := checkSum(l, x, y, sum); err != nil {
		return err
	}
	if float64(y)*sum <= 0 {
		axpy(l.w, float64(y), x)
		l.version++
	}
	return nil
}

// LearnSum updates as the second-order learner does on a mistake of the sum.
func (l *secondOrder) LearnSum(x Vector, y int, sum float64) error {
	if err := checkSum(l, x, y, sum); err != nil {
		return err
	}
	if float64(y)*sum <= 0 {
		l.r.update(x, y)
		l.version++
	}
	return nil
}
