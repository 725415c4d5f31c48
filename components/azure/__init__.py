"""Pulumi components for Azure: they turn plans into resources and decide nothing themselves."""
