"""Reusable network modules: encoder, ConvGLU, UpConv, convex upsampling, attention modules."""
