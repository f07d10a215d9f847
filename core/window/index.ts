export * from './blocked';
export * from './decide';
export * from './model';
export * from './retention';
export * from './window';
