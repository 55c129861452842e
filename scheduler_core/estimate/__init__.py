"""Online parameter estimation: rates, change rates, signal quality, priors.

See MATH.md, "Estimating parameters"; paper 004 App. E; paper 003 §4.2.
"""
